"""What the commands' runs share: the command's :class:`~gramtile.pipeline.compute.runtime.Runtime`
from its options (:func:`runtime`), its storage options put in force (:func:`apply_storage_options`,
called by the CLI before every command), and outputs checked before any work and written whole
(:func:`check_output_file`, :func:`check_output_dir`, :func:`replacing_dir`, :func:`write_text_atomic`,
:func:`write_json_atomic`).

The options these read are defined in :mod:`gramtile.workflows.commands`.
"""
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from gramtile.pipeline.compute.cluster import get_profile
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.stores.integrity import clean_stale, publish_dir, temp_sibling
from gramtile.pipeline.stores.storage import parse_storage_options, set_storage_options, storage_options
from gramtile.workflows.errors import UsageError


def runtime(args) -> Runtime:
    """The command's run-time object from its options: the cluster (a bad profile fails here) and
    the run's settings (``--no-progress``, ``--memory-mb``, ``--cache-mb``, ``--scratch``, where
    the command has them; ``--scratch`` made absolute)."""
    scratch = getattr(args, "scratch", None)  # absolute here: tasks name it to workers started elsewhere
    settings = {"progress": not getattr(args, "no_progress", False), "memory_mb": getattr(args, "memory_mb", None),
                "cache_mb": getattr(args, "cache_mb", None),
                "scratch": None if scratch is None else os.path.abspath(scratch)}
    if getattr(args, "scheduler_file", None):
        return Runtime(None, args.cluster_file, scheduler_file=args.scheduler_file, **settings)
    # from the Python API, --cluster may also be a connected distributed.Client or a Runtime
    return Runtime.of(args.cluster, args.cluster_file, **settings)


def apply_storage_options(args):
    """Put the storage options of a command in force, for it and the workers it starts:
    ``$GRAMTILE_STORAGE_OPTIONS``, then the cluster profile's ``storage_options``, then
    ``--storage-options`` (each overriding the keys of the one before). A bad JSON names the option."""
    text = getattr(args, "storage_options", None)
    cluster = getattr(args, "cluster", None)
    profile = {}
    if isinstance(cluster, str) and not getattr(args, "scheduler_file", None):
        profile = get_profile(cluster, getattr(args, "cluster_file", None)).storage_options
    if text is None and not profile:
        return
    given = parse_storage_options(text, "--storage-options") if text is not None else {}
    set_storage_options({**storage_options(), **profile, **given})


# ---- outputs ---------------------------------------------------------------------------------

def _folder_of(path: Path, option: str):
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise UsageError(f"{option} {path}: the folder {parent} does not exist. Fix: create it (mkdir -p {parent}) "
                         f"or choose another {option}")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: {parent} is a file, not a folder. Fix: choose another {option}")


def check_output_file(path, option: str = "--out", overwrite: bool | None = False) -> Path:
    """Check a file output before any work: its folder exists, it is not a folder, and an existing
    file is refused unless ``overwrite`` (``None``: an existing file is replaced, as a rerun does)."""
    path = Path(path)
    _folder_of(path, option)
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder; give a file name, e.g. {option} {path / 'out'}")
    if path.exists() and overwrite is False:
        raise UsageError(f"{option} {path} exists. Fix: pass --overwrite to replace it, or choose another {option}")
    return path


def check_output_dir(path, option: str = "--out", overwrite: bool = False, owned=(), kind: str = "") -> Path:
    """Check a folder output before any work: it is not a file; an existing folder holding any of
    the files ``owned`` (what the command writes there) is refused unless ``overwrite``. With
    ``kind`` (e.g. "model directory", marked by any of ``owned``), a non-empty folder that is not one
    is refused even with ``overwrite`` (it would mix two things in one folder)."""
    path = Path(path)
    _folder_of(path, option)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path} is a file, not a folder. Fix: choose another {option}")
    held = [name for name in owned if (path / name).exists()]
    if kind and path.is_dir() and any(path.iterdir()) and not held:
        raise UsageError(f"{option} {path} exists and is not a {kind} (it holds {sorted(os.listdir(path))[:3]}). "
                         f"Fix: choose another {option}")
    if held and not overwrite:
        raise UsageError(f"{option} {path} already holds {', '.join(held)}. Fix: pass --overwrite to replace "
                         f"{'them' if len(held) > 1 else 'it'}, or choose another {option}")
    return path


@contextmanager
def replacing_dir(path: Path, overwrite: bool = True):
    """Write a folder whole or not at all: yields a fresh sibling folder to fill; on success it
    takes ``path``'s place by a rename (an old one is removed only after the new one is in place;
    without ``overwrite`` one that appeared meanwhile is kept and the new one refused), on failure
    it is removed and ``path`` is left as it was. Temporary folders of killed runs beside ``path``
    are removed first."""
    path = Path(path)
    clean_stale(path)
    tmp = temp_sibling(path)
    try:
        yield tmp
        publish_dir(tmp, path, overwrite, "folder")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _replaced_atomically(path: Path):
    """An open text file at ``path.partial`` renamed to ``path`` when the block ends: a failed
    write (disk full) leaves no truncated file, and an existing one stays as it was."""
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, obj, indent: int | None = 1):
    """Write ``obj`` as JSON to ``path`` as :func:`write_text_atomic` writes text, streamed: the text
    (the same bytes ``json.dumps(obj, indent=indent)`` gives) is never held whole in memory, which
    for the per-example predictions of a million-example evaluation is a few hundred MB."""
    with _replaced_atomically(path) as f:
        json.dump(obj, f, indent=indent)


def write_text_atomic(path: Path, text: str):
    """Write ``text`` to ``path`` through ``path.partial`` and a rename: a failed write (disk full)
    leaves no truncated file, and an existing one stays as it was."""
    with _replaced_atomically(path) as f:
        f.write(text)
