"""Where a store lives: a local path, or an fsspec URL (``scheme://...``).

The store modules (:mod:`~gramtile.pipeline.stores.gram_store`, :mod:`~gramtile.pipeline.stores.corpus_store`,
:mod:`~gramtile.pipeline.resources.build`) reach their bytes only through :func:`location`, which
returns one of two small objects with the same methods:

- :class:`LocalLocation` for a path: the very ``pathlib``/``os`` calls the stores always made
  (Zarr gets the path string, the lock is :class:`~gramtile.pipeline.stores.locks.StoreLock` with
  ``O_EXCL``, the log is appended to), so local stores behave exactly as before;
- :class:`FsspecLocation` for a URL (``file:///shared/g.zarr``, ``s3://bucket/g.zarr``,
  ``memory://g.zarr``): Zarr gets an ``FsspecStore`` (at ``file://`` over
  :class:`AtomicLocalFileSystem`, so each object is replaced atomically as at a path), small
  files go through the fsspec filesystem, the lock is :class:`~gramtile.pipeline.stores.locks.UrlLock`.

Filesystems differ in two capabilities the stores need:

``exclusive``
    An atomic create-if-absent (``open(path, "xb")``). fsspec's local and memory filesystems
    have it; object stores are treated as lacking it, so a lock there is written if absent and
    read back (best effort, see :class:`~gramtile.pipeline.stores.locks.UrlLock`).
``appendable``
    Appending to an existing file. Local and memory filesystems append to ``log.jsonl``;
    elsewhere (object stores cannot append) each run writes its own object
    ``log/<run>.jsonl`` (:class:`RunObjectLog`), and :func:`read_jsonl_log` merges both forms.

Credentials and options of remote filesystems come from their usual environment variables and
config files (e.g. ``AWS_PROFILE`` for s3fs); chained URLs (``simplecache::s3://...``) are not
supported.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import time
from pathlib import Path

import fsspec
from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper
from fsspec.implementations.local import LocalFileSystem
from zarr.storage import FsspecStore, StorePath

from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError
from gramtile.pipeline.stores.locks import StoreLock, UrlLock

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

#: Protocols whose fsspec filesystem creates files exclusively ("xb") and appends ("ab").
#: Anything else is handled as an object store (no conditional create, no append).
LOCAL_LIKE_PROTOCOLS = {"file", "local", "memory"}

#: Package that provides a scheme's fsspec filesystem (for the "not installed" error).
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs", "abfss": "adlfs",
             "az": "adlfs", "adl": "adlfs", "oci": "ocifs", "webdav": "webdav4", "sftp": "paramiko",
             "ssh": "paramiko", "http": "aiohttp", "https": "aiohttp", "hf": "huggingface_hub",
             "dropbox": "dropboxdrivefs", "box": "boxfs", "lakefs": "lakefs-spec"}


def is_url(x) -> bool:
    """True when ``x`` is a string of the form ``scheme://...`` (a ``Path`` never is)."""
    return isinstance(x, str) and bool(_URL.match(x))


def location(x: str | os.PathLike[str] | LocalLocation | FsspecLocation) -> LocalLocation | FsspecLocation:
    """The :class:`LocalLocation` or :class:`FsspecLocation` of a path, URL or location.

    Raises
    ------
    StoreError
        A URL whose scheme has no installed fsspec filesystem (the message names the package).
    """
    if isinstance(x, (LocalLocation, FsspecLocation)):
        return x
    return FsspecLocation(x) if is_url(x) else LocalLocation(x)


def beside(x, suffix: str):
    """The path or URL of a sibling of ``x`` named ``x``'s last component plus ``suffix``.

    ``beside("s3://b/g.zarr", ".corpus.zarr")`` is ``"s3://b/g.zarr.corpus.zarr"``; a path
    gives a :class:`Path` in the same directory.
    """
    if is_url(x):
        return x.rstrip("/") + suffix
    p = Path(x)
    return p.with_name(p.name + suffix)


def refuse_url(x, what: str, fix: str):
    """Raise :class:`StoreError` when ``x`` is a URL: ``what`` is not supported at URLs."""
    if is_url(x):
        raise StoreError(f"{x}: {what} cannot be written to a URL. Fix: {fix}")


def unreadable_metadata(loc, rel: str = "", depth: int = 5) -> list:
    """The ``zarr.json`` files of the store at ``loc`` (its groups and arrays, ``depth`` levels
    down) that are not valid JSON objects, as paths relative to the store."""
    bad = []
    meta = f"{rel}zarr.json"
    try:
        doc = json.loads(loc.read_bytes(meta))
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        return bad
    except (ValueError, UnicodeDecodeError, RecursionError):
        bad.append(meta)
    if depth:
        for name in sorted(loc.listdir(rel)):
            if not name.startswith(".") and loc.exists(f"{rel}{name}/zarr.json"):
                bad += unreadable_metadata(loc, f"{rel}{name}/", depth - 1)
    return bad


def check_metadata(loc, what: str, fix_root: str, fix_array: str | None = None):
    """Raise :class:`StoreCorruptError` naming the first unreadable ``zarr.json`` of the store at
    ``loc`` (``what``: e.g. "Gram store"), with the fix: ``fix_root`` for the store's own
    ``zarr.json``, else ``fix_array`` (default: remove the damaged array's folder so that the next
    ``gramtile gram`` recreates it and recomputes what it held)."""
    bad = unreadable_metadata(loc)
    if not bad:
        return
    first = bad[0]
    where = f"{loc}/{first}"
    if first == "zarr.json":
        fix = fix_root
    elif fix_array:
        fix = fix_array
    else:
        node = f"{loc}/{first[:-len('/zarr.json')]}"
        fix = (f"remove the damaged array (rm -r {node}) and rerun the `gramtile gram` command that wrote the store: "
               "the array is recreated and the tiles it held are recomputed")
    more = f" (and {len(bad) - 1} more: {', '.join(bad[1:])})" if len(bad) > 1 else ""
    raise StoreCorruptError(f"{where} is damaged (not valid Zarr JSON metadata){more}: the {what} cannot be "
                            f"opened. Fix: {fix}")


class LocalLocation:
    """A store directory on a local (or mounted) filesystem; ``path`` is a :class:`Path`."""

    exclusive = True
    appendable = True
    process_local = False

    def __init__(self, path):
        self.path = Path(path)

    def __str__(self):
        return str(self.path)

    def canonical(self) -> str:
        """The absolute path (what provenance and tasks record)."""
        return str(self.path.resolve())

    def zarr_store(self, rel: str = ""):
        """What to give ``zarr.open_*`` for the node at ``rel``: the path string, as always."""
        return str(self.path / rel) if rel else str(self.path)

    def exists(self, rel: str = "") -> bool:
        return (self.path / rel).exists() if rel else self.path.exists()

    def listdir(self, rel: str = "") -> list:
        p = self.path / rel if rel else self.path
        return [c.name for c in p.iterdir()] if p.is_dir() else []

    def makedirs(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def read_bytes(self, rel: str) -> bytes:
        return (self.path / rel).read_bytes()

    def write_bytes(self, rel: str, data: bytes):
        (self.path / rel).write_bytes(data)

    def remove(self, rel: str):
        (self.path / rel).unlink(missing_ok=True)

    def remove_all(self):
        """Delete the whole store directory (a store a failed command created and never filled)."""
        shutil.rmtree(self.path, ignore_errors=True)

    def size(self, rel: str) -> int:
        """Bytes in ``rel``; 0 when it does not exist."""
        p = self.path / rel
        return p.stat().st_size if p.exists() else 0

    def last_byte(self, rel: str) -> bytes:
        with open(self.path / rel, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1)

    def append_text(self, rel: str, text: str):
        """One write call appending ``text`` to ``rel`` (created if absent)."""
        with open(self.path / rel, "a", encoding="utf-8") as f:
            f.write(text)

    def lock(self, name: str, what: str):
        """The store's writer lock file ``name`` (``O_EXCL``, stale-pid takeover)."""

        return StoreLock(self.path / name, what)


class FsspecLocation:
    """A store at an fsspec URL; ``path`` is the URL as given (messages and provenance show it).

    Parameters
    ----------
    url : str
        ``scheme://...``; the filesystem is fsspec's implementation of ``scheme``.
    """

    def __init__(self, url: str):
        self.url = self.path = url
        self._base = url.rstrip("/")
        self.protocol = url.split("://", 1)[0].lower()
        try:
            fsspec.get_filesystem_class(self.protocol)
        except ImportError as e:
            pkg = _PACKAGES.get(self.protocol)
            fix = f"pip install {pkg}" if pkg else f"install the fsspec implementation of {self.protocol}:// ({e})"
            raise StoreError(f"store URL {url}: no fsspec filesystem for scheme {self.protocol!r} is installed "
                             f"({e}). Fix: {fix}") from None
        except ValueError:
            raise StoreError(f"store URL {url}: fsspec knows no scheme {self.protocol!r}. Fix: use a local path, "
                             f"or a URL of an fsspec filesystem (file://, memory://, s3:// with s3fs, "
                             f"gs:// with gcsfs, ...)") from None
        local_like = self.protocol in LOCAL_LIKE_PROTOCOLS
        # fsspec's local filesystem does not create parent directories unless asked to
        self._options = {"auto_mkdir": True} if self.protocol in ("file", "local") else {}
        self.fs, self.root = fsspec.core.url_to_fs(self._base, **self._options)
        self.root = self.root.rstrip("/") or self.root
        self.exclusive = self.appendable = local_like
        #: memory:// lives in this process only: worker processes cannot see it
        self.process_local = self.protocol == "memory"
        self._zarr = None

    def __str__(self):
        return self.url

    def canonical(self) -> str:
        """The URL as given (another machine resolves it the same way)."""
        return self.url

    def _p(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def zarr_store(self, rel: str = ""):
        """An ``FsspecStore`` on the URL (or a ``StorePath`` into it for the node at ``rel``)."""
        if self._zarr is None:
            if self.protocol in ("file", "local"):
                # Zarr's own local store replaces each object atomically; fsspec's local
                # filesystem writes in place, so a writer killed mid-write (a prepare or a run
                # stopped by SIGKILL) could leave a torn zarr.json. Keep the path's guarantee.
                fs = AsyncFileSystemWrapper(AtomicLocalFileSystem(auto_mkdir=True), asynchronous=True)
                self._zarr = FsspecStore(fs=fs, path=self.root)
            else:
                self._zarr = FsspecStore.from_url(self._base, storage_options=self._options or None)
        return StorePath(self._zarr, rel) if rel else self._zarr

    def exists(self, rel: str = "") -> bool:
        return bool(self.fs.exists(self._p(rel)))

    def listdir(self, rel: str = "") -> list:
        try:
            entries = self.fs.ls(self._p(rel), detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(posixpath.basename(str(e).rstrip("/")) for e in entries)

    def makedirs(self) -> None:
        if self.protocol in LOCAL_LIKE_PROTOCOLS:  # object stores have no directories to make
            self.fs.makedirs(self.root, exist_ok=True)

    def read_bytes(self, rel: str) -> bytes:
        return self.fs.cat_file(self._p(rel))

    def write_bytes(self, rel: str, data: bytes):
        self.fs.pipe_file(self._p(rel), bytes(data))

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Write ``rel`` only if it does not exist; False when it did.

        Atomic where the filesystem is :attr:`exclusive`; elsewhere a check then a write, which
        two writers can interleave (callers read the object back to detect the loser).
        """
        p = self._p(rel)
        if self.exclusive:
            try:
                with self.fs.open(p, "xb") as f:
                    f.write(data)
            except FileExistsError:
                return False
            return True
        if self.fs.exists(p):
            return False
        self.fs.pipe_file(p, bytes(data))
        return True

    def remove(self, rel: str):
        try:
            self.fs.rm_file(self._p(rel))
        except FileNotFoundError:
            pass

    def remove_all(self):
        """Delete every object under the store's URL (a store a failed command created and never filled)."""
        try:
            self.fs.rm(self.root, recursive=True)
        except FileNotFoundError:
            pass

    def size(self, rel: str) -> int:
        p = self._p(rel)
        return int(self.fs.size(p) or 0) if self.fs.exists(p) else 0

    def last_byte(self, rel: str) -> bytes:
        with self.fs.open(self._p(rel), "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1)

    def append_text(self, rel: str, text: str):
        if not self.appendable:
            raise StoreError(f"{self.url}: {self.protocol}:// cannot append to {rel}; write one object per run "
                             f"(RunObjectLog) instead")
        with self.fs.open(self._p(rel), "ab") as f:
            f.write(text.encode("utf-8"))

    def lock(self, name: str, what: str):
        """The store's writer lock object ``name`` (see :class:`~gramtile.pipeline.stores.locks.UrlLock`)."""

        return UrlLock(self, name, what)


class AtomicLocalFileSystem(LocalFileSystem):
    """fsspec's local filesystem whose ``pipe_file`` (each object Zarr writes) is atomic.

    The bytes go to a temporary file beside the target, which is then renamed over it, as in
    Zarr's own local store: a writer killed mid-write leaves the old object (and at worst a
    ``*.partial`` file), never a torn one.
    """

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        path = self._strip_protocol(path)
        if mode == "create" and os.path.exists(path):
            raise FileExistsError(path)
        if self.auto_mkdir:
            self.makedirs(self._parent(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}-{os.urandom(4).hex()}.partial"
        try:
            with open(tmp, "wb") as f:
                f.write(value)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


# ---- JSON-lines logs -------------------------------------------------------------------------

class AppendLog:
    """A JSON-lines log appended to in place (``log.jsonl``), one write call per line."""

    def __init__(self, loc, name: str):
        self.loc, self.name = location(loc), name
        self._checked = False

    def write(self, record: dict):
        lead = ""
        if not self._checked:
            # a driver killed mid-line left a torn last line: start ours on a fresh line
            if self.loc.size(self.name):
                lead = "" if self.loc.last_byte(self.name) == b"\n" else "\n"
            self._checked = True
        self.loc.append_text(self.name, lead + json.dumps(record, sort_keys=True) + "\n")

    def flush(self):
        pass


class RunObjectLog:
    """A JSON-lines log where the filesystem cannot append: one object per run.

    The records of run ``R`` (their ``"run"`` field) go to ``<dir>/R.jsonl``, which is rewritten
    whole when a ``start`` or ``end`` record arrives and otherwise at most every
    ``flush_seconds``; so a driver killed mid-run loses at most that many seconds of tile lines
    (the done mask, not the log, says which tiles are finished). One driver writes per store.
    """

    def __init__(self, loc, dirname: str, flush_seconds: float = 5.0):
        self.loc, self.dir, self.flush_seconds = location(loc), dirname, flush_seconds
        self._runs: dict = {}
        self._dirty: set = set()
        self._last = time.monotonic()
        self._anon = os.urandom(6).hex()

    def write(self, record: dict):
        run = str(record.get("run") or self._anon)
        self._runs.setdefault(run, []).append(json.dumps(record, sort_keys=True))
        self._dirty.add(run)
        if record.get("event") in ("start", "end") or time.monotonic() - self._last >= self.flush_seconds:
            self.flush()

    def flush(self):
        for run in sorted(self._dirty):
            self.loc.write_bytes(f"{self.dir}/{run}.jsonl", ("\n".join(self._runs[run]) + "\n").encode("utf-8"))
        self._dirty.clear()
        self._last = time.monotonic()


def jsonl_log(loc, name: str):
    """The writer of log ``name`` at ``loc``: :class:`AppendLog` where the filesystem appends,
    else :class:`RunObjectLog` into the directory ``name`` without its suffix."""
    loc = location(loc)
    if loc.appendable:
        return AppendLog(loc, name)
    return RunObjectLog(loc, posixpath.splitext(name)[0])


def _parse_lines(text: str) -> list:
    out = []
    for line in text.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line torn by a killed writer
    return out


def read_jsonl_log(loc, name: str, exclude=()) -> list:
    """Every record of log ``name`` at ``loc``, oldest first, whichever way it was written.

    The appended file comes first, then the per-run objects in the order of their first
    record's ``time`` (objects named in ``exclude`` skipped). A torn line does not parse and is skipped.
    """
    loc = location(loc)
    out = []
    if loc.exists(name):
        out.extend(_parse_lines(loc.read_bytes(name).decode("utf-8")))
    d = posixpath.splitext(name)[0]
    runs = []
    for obj in loc.listdir(d) if loc.exists(d) else []:
        if obj.endswith(".jsonl") and obj not in exclude:
            recs = _parse_lines(loc.read_bytes(f"{d}/{obj}").decode("utf-8"))
            if recs:
                runs.append((recs[0].get("time") or 0, obj, recs))
    for _, _, recs in sorted(runs, key=lambda r: (r[0], r[1])):
        out.extend(recs)
    return out
