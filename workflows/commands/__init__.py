"""One module per ``gramtile`` subcommand (see :mod:`gramtile.workflows.cli`)."""
