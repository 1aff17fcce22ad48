"""One module per ``gramtile`` subcommand (see :mod:`gramtile.workflows.cli`)."""
import argparse

from gramtile.pipeline.progress import log

#: ``--cluster`` help of the commands that compute Gram stores (``gram``, ``run``).
CLUSTER_HELP = ("cluster.yaml profile (default local: Dask worker processes; threads = worker threads of this "
                "process, no Dask cluster; sequential = in-process, one tile at a time)")


class DeprecatedAlias(argparse.Action):
    """An old option spelling: stores into the new option's ``dest`` and warns once, naming
    the new spelling (accepted for one version, then removed)."""

    def __init__(self, option_strings, dest, new: str = "", **kw):
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        log.warning(f"{parser.prog}: {option_string} is deprecated here and will be removed in the next version; "
                    f"use {self.new}")
        setattr(namespace, self.dest, values)


def deprecated(p, old: str, new: str, dest: str, **kw):
    """Accept ``old`` as a hidden deprecated spelling of option ``new`` (same ``dest``)."""
    p.add_argument(old, dest=dest, action=DeprecatedAlias, new=new, help=argparse.SUPPRESS, **kw)
