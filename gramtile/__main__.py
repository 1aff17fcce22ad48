import sys

from gramtile.workflows.cli import main

sys.exit(main())
