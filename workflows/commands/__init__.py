"""One module per ``gramtile`` subcommand (see :mod:`gramtile.workflows.cli`), in two halves: the
command's options (``<name>.py``: ``add_parser``, its argparse definition and help, with light
imports only) and its run (``<name>_run.py``: ``run(args)``, which imports the engine at its top).
The parser's ``func`` is a :class:`DeferredRun`, which imports the run module by name when the
command runs, so that ``gramtile COMMAND --help`` loads none of the engine's libraries.

This package module holds what the commands' options share (cluster, storage, number and output
options, deprecated spellings); what their runs share is :mod:`gramtile.workflows.commands.running`.
"""
import argparse
import importlib
import math

from gramtile.pipeline.progress import log


class DeferredRun:
    """The ``func`` of a command's parser: calling it imports the command's run module
    (``gramtile.workflows.commands.<command>_run``) and returns its ``run(args)``."""

    def __init__(self, command: str):
        self.module = f"{__name__}.{command}_run"

    def __call__(self, args) -> int:
        return importlib.import_module(self.module).run(args)


#: ``--cluster`` help of the commands that compute Gram stores (``gram``, ``run``).
CLUSTER_HELP = ("cluster.yaml profile (default local: Dask worker processes; threads = worker threads of this "
                "process, no Dask cluster; sequential = in-process, one tile at a time), or the address of a "
                "running Dask scheduler (tcp://HOST:8786)")


def add_cluster_options(p, default: str = "local", help: str = CLUSTER_HELP, metavar: str | None = None):
    """``--cluster``, ``--cluster-file`` and ``--scheduler-file``: where a command runs its tasks
    (:func:`~gramtile.workflows.commands.running.runtime` turns them into the command's Runtime)."""
    p.add_argument("--cluster", default=default, metavar=metavar, help=f"{help} (default {default})")
    p.add_argument("--cluster-file", default=None, metavar="FILE",
                   help="cluster.yaml to read profiles from (default ./cluster.yaml, then the built-in profiles)")
    p.add_argument("--scheduler-file", default=None, metavar="FILE",
                   help="connect to the Dask scheduler that wrote FILE (dask scheduler --scheduler-file FILE); "
                        "replaces --cluster")


def add_storage_options(p):
    """``--storage-options JSON``: fsspec options of the object stores a command opens (applied by
    :func:`~gramtile.workflows.commands.running.apply_storage_options` before the command runs)."""
    p.add_argument("--storage-options", default=None, metavar="JSON",
                   help="fsspec options of stores at object-store URLs, as a JSON object, e.g. "
                        "'{\"endpoint_url\": \"http://127.0.0.1:9000\", \"profile\": \"lab\"}' or '{\"anon\": true}' "
                        "(s3fs; default: the cluster profile's storage_options, then the AWS_* environment); "
                        "these keys override the profile's")


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


# ---- numbers ---------------------------------------------------------------------------------

def _number(kind, test, wants):
    def parse(text):
        try:
            v = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wants}") from None
        if not test(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wants}")
        return v
    parse.__name__ = wants  # argparse names the type in its messages
    return parse


#: argparse ``type=`` of options that must be a positive finite number (C, a budget in MB).
positive_float = _number(float, lambda v: math.isfinite(v) and v > 0, "a positive finite number")
#: ... an integer >= 1 (counts: epochs, folds, landmarks, shard sizes, token limits).
positive_int = _number(int, lambda v: v >= 1, "an integer >= 1")
#: ... an integer >= 2 (folds).
int_at_least_2 = _number(int, lambda v: v >= 2, "an integer >= 2")
#: ... an integer >= 0 (seeds).
seed_int = _number(int, lambda v: 0 <= v < 2**32, "an integer seed in 0..4294967295")


# ---- outputs ---------------------------------------------------------------------------------

def overwrite_flag(p, what: str):
    """The ``--overwrite`` option of a command whose --out would replace ``what``."""
    p.add_argument("--overwrite", action="store_true",
                   help=f"replace an existing {what} at --out (default: refuse it, so nothing is lost by a typo)")
