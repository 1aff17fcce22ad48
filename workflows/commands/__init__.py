"""One module per ``gramtile`` subcommand (see :mod:`gramtile.workflows.cli`)."""

#: ``--cluster`` help of the commands that compute Gram stores (``gram``, ``run``).
CLUSTER_HELP = ("cluster.yaml profile (default local: Dask worker processes; threads = worker threads of this "
                "process, no Dask cluster; sequential = in-process, one tile at a time)")
