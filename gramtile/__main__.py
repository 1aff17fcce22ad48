from gramtile.workflows.cli import entry

entry()
