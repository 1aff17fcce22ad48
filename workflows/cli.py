"""The ``gramtile`` command line.

Each subcommand has two modules under ``gramtile.workflows.commands``: its options
(``<name>.py``, exposing ``add_parser(subparsers)``, which registers the subcommand and sets
``func``) and its run (``<name>_run.py``, exposing ``run(args)``; ``func`` imports it by name when
the command runs). :data:`COMMANDS` lists them with their one-line help, so that
``gramtile --version``, ``gramtile --help`` and ``gramtile COMMAND --help`` load nothing but what
they show: the options module of the command given is imported by name when the command line
names it, and the engine's libraries (Zarr, Numba, scikit-learn, spaCy, Dask) only by the run
module of a command that runs (and, for any command that runs, by the stores' error helpers). Errors of the :class:`~gramtile.kernels.errors.GramtileError` hierarchy, and the
operating system's (a full disk, an unwritable path: :func:`os_error_message`), are printed as
one clear message with exit status 2; Ctrl-C exits 130 with one line; anything else is a bug and
shows a traceback.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys
from importlib.metadata import version
from types import MappingProxyType

from gramtile.kernels.errors import GramtileError
from gramtile.pipeline.compute.errors import Terminated
from gramtile.pipeline.compute.interrupts import Interrupts
from gramtile.pipeline.progress import configure

#: the subcommands and their one-line help (each module's ``add_parser`` says the same; a test
#: holds them equal), in the order ``gramtile --help`` lists them
COMMANDS = MappingProxyType({
    "demo": "run the end-to-end demo (parse, corpus store, Dask Gram tiles, k-fold SVM)",
    "evaluate": "k-fold / fixed-split evaluation of a classifier, regressor or ranker from a Gram store",
    "export": "write K of a complete Gram store (or a selection) to .npy, LIBSVM or SVM-light",
    "features": "explicit feature rows of st, bow, route or exact subsequence kernels",
    "gram": "compute a tiled Gram matrix into a Zarr store (resumable)",
    "inspect": "counts, labels, sizes, vocabularies and provenance of a corpus store",
    "predict": "predict labels, real values or rankings of new examples with a saved model",
    "prepare": "read, parse and shard a corpus into a Zarr corpus store (resumable)",
    "profiles": "list the cluster profiles --cluster accepts, with their source file",
    "run": "run a workflow (a shipped one by name, or a YAML file): data, kernels, protocol, report",
    "status": "tiles done / total and provenance of a Gram store",
    "train": "train a classifier, regressor or ranker and save a model directory",
    "verify": "re-check every done tile of a Gram store (--repair recomputes bad tiles), or every file of a "
              "model directory",
})
PACKAGE = "gramtile.workflows.commands"


def command_module(name: str):
    """The options module of subcommand ``name`` (its ``add_parser``), imported now."""
    return importlib.import_module(f"{PACKAGE}.{name}")


def _storage():
    """The stores' location helpers (URLs, disks, object-store errors), imported when a command runs."""
    return importlib.import_module("gramtile.pipeline.stores.storage")


def _named_command(argv) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top-level options
    take no value)."""
    for a in argv:
        if a == "--":
            return None
        if not a.startswith("-"):
            return a if a in COMMANDS else None
    return None


_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):`~?([^`]+)`")


def plain(text):
    """Help text without reStructuredText markup: ``x`` and :func:`x` become x."""
    if not text or text is argparse.SUPPRESS:
        return text
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if "~" in m.group(0) else m.group(1), text)
    return text.replace("``", "").replace("`", "")


def _verbosity_flags(p, default):
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1, default=default,
                   help="print only warnings and errors besides the result (no progress, no summaries)")
    g.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1, default=default,
                   help="also print debugging messages")


def build_parser(commands=None) -> argparse.ArgumentParser:
    """The parser of the command line; ``commands``: the subcommands whose modules give their full
    parsers (None: all of them), the others are listed with their help only."""
    p = argparse.ArgumentParser(
        prog="gramtile",
        description="Tiled Gram matrices of structured NLP kernels, stored in Zarr, "
                    "and kernel machines trained from them.")
    p.add_argument("--version", action="version", version=f"gramtile {version('gramtile')}")
    _verbosity_flags(p, 0)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in COMMANDS.items():
        if commands is None or name in commands:
            command_module(name).add_parser(sub)
        else:
            sub.add_parser(name, help=summary, add_help=False)
    for cmd in sub.choices.values():
        # after the command too (`gramtile gram ... --quiet`); SUPPRESS keeps a flag given before it
        _verbosity_flags(cmd, argparse.SUPPRESS)
        cmd.description = plain(cmd.description)
        for a in cmd._actions:
            a.help = plain(a.help)
    for a in sub._choices_actions:
        a.help = plain(a.help)
    return p


#: Commands whose --out may be an fsspec URL: `gram` (a Gram store) and `prepare` (a corpus
#: store). Every other --out is a local file or directory, where a URL would silently become a
#: local path such as ``s3:/bucket/x``.
URL_OUT_COMMANDS = ("gram", "prepare")


def _local_out(args):

    out = getattr(args, "out", None)
    if args.command not in URL_OUT_COMMANDS and isinstance(out, str):
        _storage().refuse_url(out, f"`gramtile {args.command} --out`", "write it to a local path and copy it to the shared "
                   "storage afterwards (only `gramtile gram --out` and `gramtile prepare --out` write to URLs)")


_DISK_FULL = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_NO_ACCESS = {errno.EACCES, errno.EPERM, errno.EROFS}


def _disk(path) -> str:
    """The mount point holding ``path`` and its free space, e.g. "/data (12 KB free of 2.0 GB)"."""
    return _storage().disk_summary(path)


def os_error_message(e: OSError, near=None) -> str:
    """One line for an operating-system error a command met (a full disk, a path it cannot write,
    a vanished file): the file, what happened and the fix. These are the machine's state, not bugs.
    ``near`` (the command's --out) names the place when the error carries no file name."""
    name = e.filename if e.filename is not None else (near if near is not None else "a file")
    what = e.strerror or str(e)
    if e.errno in _DISK_FULL:
        where = e.filename if e.filename is not None else near
        disk = f"the disk {_disk(where)}" if where is not None and not _storage().is_url(where) else "the disk"
        return (f"cannot write {name}: {what} ({disk} or the quota holding it is full). Fix: free space there or "
                f"choose another --out, then rerun the same command (work already finished is kept)")
    if e.errno in _NO_ACCESS:
        return f"cannot write {name}: {what}. Fix: choose a --out in a folder you can write, or fix its permissions"
    if e.errno == errno.ENOENT:
        return f"{name}: {what}. Fix: check the path (its folder must exist)"
    return f"{name}: {what}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    name = _named_command(argv)
    parser = build_parser(() if name is None else (name,))
    args = parser.parse_args(argv)
    configure(getattr(args, "verbosity", 0))
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        with Interrupts():
            rc = run(args)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (Terminated): stores were left consistent on the way out
        print(f"gramtile {args.command}: interrupted{' by SIGTERM' if isinstance(e, Terminated) else ''}; "
              "rerun the same command to resume", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    except GramtileError as e:
        print(f"gramtile {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # stdout closed early (e.g. piped into `head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as e:
        msg = _storage().object_store_message(e, _urls(args)) or os_error_message(e, getattr(args, 'out', None))
        print(f"gramtile {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except (MemoryError, RecursionError) as e:
        # an example too large for a kernel's dynamic program (its tables grow with the product of two
        # examples' node counts: a 100,000-node tree needs 80 GB against itself), or nested too deeply
        what = "out of memory" if isinstance(e, MemoryError) else "structure nested too deeply"
        print(f"gramtile {args.command}: error: {what} ({type(e).__name__}: {e}); an example is too large for "
              f"this step (`gramtile inspect CORPUS.zarr` shows the largest). Fix: split or drop the largest examples, "
              f"or run on a machine with more memory; work already finished is kept", file=sys.stderr)
        return 2
    except Exception as e:
        # an object store's own errors (botocore's, aiohttp's) met mid-run: one line, not a traceback
        msg = _storage().object_store_message(e, _urls(args))
        if msg is None:
            raise  # a bug: the traceback is wanted
        print(f"gramtile {args.command}: error: {msg}", file=sys.stderr)
        return 2
    return rc


def run(args) -> int:
    """Run the command of a parsed command line (``args`` from :func:`build_parser`) and return its
    exit status; errors propagate (:func:`main` prints them, the Python API raises them)."""
    _local_out(args)
    importlib.import_module(f"{PACKAGE}.running").apply_storage_options(args)
    return int(args.func(args) or 0)


def _urls(args) -> list:
    """The store URLs a command was given (its positional store, --corpus, --gram, --out, ...)."""
    out = []
    for value in vars(args).values():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, str) and _storage().is_url(v):
                out.append(v)
    return out


def entry() -> None:
    """The ``gramtile`` console script and ``python -m gramtile``: :func:`main`, then a fast exit.

    A command returns only after closing what it opened (stores, logs, clusters), so nothing is
    left to flush but the standard streams. The interpreter's own finalisation afterwards (module
    teardown, Numba/LLVM objects, Dask's thread pools) writes nothing and takes 0.3-0.4 s, which
    is 10 % of a small ``gramtile gram``; it is skipped with ``os._exit``. Set
    ``GRAMTILE_FULL_EXIT=1`` to exit normally (e.g. under a coverage tool that writes at exit).
    Uncaught exceptions (bugs) propagate as usual, with a traceback and a normal exit.
    """
    rc = main()
    if os.environ.get("GRAMTILE_FULL_EXIT"):
        sys.exit(rc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed pipe or stream: nothing more can reach it
            pass
    os._exit(rc)


if __name__ == "__main__":
    entry()
