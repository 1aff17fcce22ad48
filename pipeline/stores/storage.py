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
config files (e.g. ``AWS_PROFILE``, ``AWS_ENDPOINT_URL`` for s3fs), and from the storage options
of :func:`set_storage_options` (a cluster profile's ``storage_options``, ``--storage-options``),
which travel to worker processes in ``$GRAMTILE_STORAGE_OPTIONS``. Chained URLs
(``simplecache::s3://...``) are refused (:func:`location`): a cache in front of a store that is
being written would serve stale objects. The first location of an ``s3://`` bucket in a process
asks the endpoint about the bucket once (:func:`check_reachable`), so an unreachable endpoint,
missing credentials or a missing bucket stop a command at once with one line; errors met later
are worded by :func:`object_store_message`.
"""
from __future__ import annotations

import asyncio
import json
import os
import posixpath
import re
import shutil
import time
from collections import OrderedDict, deque
from contextlib import contextmanager
from pathlib import Path

import fsspec
from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper
from fsspec.implementations.local import LocalFileSystem
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync as zarr_sync
from zarr.storage import FsspecStore, StorePath, WrapperStore

from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError
from gramtile.pipeline.stores.locks import StoreLock, UrlLock

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_CHAINED = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)::")

#: Protocols whose fsspec filesystem creates files exclusively ("xb") and appends ("ab").
#: Anything else is handled as an object store (no conditional create, no append).
LOCAL_LIKE_PROTOCOLS = {"file", "local", "memory"}

#: Package that provides a scheme's fsspec filesystem (for the "not installed" error).
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs", "abfss": "adlfs",
             "az": "adlfs", "adl": "adlfs", "oci": "ocifs", "webdav": "webdav4", "sftp": "paramiko",
             "ssh": "paramiko", "http": "aiohttp", "https": "aiohttp", "hf": "huggingface_hub",
             "dropbox": "dropboxdrivefs", "box": "boxfs", "lakefs": "lakefs-spec"}


#: The environment variable that carries the storage options of a run to every process it starts
#: (a JSON object; :func:`set_storage_options`).
OPTIONS_ENV = "GRAMTILE_STORAGE_OPTIONS"
_S3 = ("s3", "s3a")
#: Options gramtile gives a filesystem unless the storage options set them: s3fs asks for an
#: object's size (a HEAD request) before every whole-object read, to split reads larger than a
#: block (50 MB) into concurrent ranges; a store's objects are far smaller, so every read cost two
#: requests.
_DEFAULT_OPTIONS = {p: {"max_concurrency": 1} for p in _S3}
_OPTIONS_EXAMPLE = '{"endpoint_url": "http://127.0.0.1:9000", "profile": "lab"}'


def parse_storage_options(text, what: str = "--storage-options") -> dict:
    """The JSON object ``text`` as a dict. A :class:`StoreError` naming ``what`` and the fix when it
    is not valid JSON or not an object."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise StoreError(f"{what} {text!r} is not valid JSON ({getattr(e, 'msg', e)} at character "
                         f"{getattr(e, 'pos', '?')}). Fix: give a JSON object in single quotes, e.g. "
                         f"{what} '{_OPTIONS_EXAMPLE}'") from None
    if not isinstance(value, dict):
        raise StoreError(f"{what} {text!r} is a JSON {type(value).__name__}, not an object. Fix: give a JSON "
                         f"object of the filesystem's options, e.g. {what} '{_OPTIONS_EXAMPLE}'")
    return value


_parsed: dict = {}


def storage_options() -> dict:
    """The storage options in force for object stores: ``$GRAMTILE_STORAGE_OPTIONS``, which
    :func:`set_storage_options` sets (and a user may set, e.g. for ``dask worker`` processes)."""
    text = os.environ.get(OPTIONS_ENV)
    if not text:
        return {}
    if text not in _parsed:
        _parsed[text] = parse_storage_options(text, f"${OPTIONS_ENV}")
    return dict(_parsed[text])


def set_storage_options(options: dict | None):
    """Give every object store that this process, and the worker processes it starts afterwards,
    opens these fsspec options (s3fs: ``endpoint_url``, ``profile``, ``anon``, ``key``, ``secret``,
    ``client_kwargs``, ...); None or ``{}`` clears them. They are kept in ``$GRAMTILE_STORAGE_OPTIONS``,
    which Dask's local worker processes and SLURM jobs (``sbatch`` exports the environment) inherit;
    workers started by hand (``dask worker``) need it set in their own environment."""
    if not options:
        os.environ.pop(OPTIONS_ENV, None)
        return
    if not isinstance(options, dict):
        raise StoreError(f"storage options {options!r} are not a mapping. Fix: give a mapping such as "
                         f"{_OPTIONS_EXAMPLE}")
    try:
        os.environ[OPTIONS_ENV] = json.dumps(options, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise StoreError(f"storage options {options!r} cannot be written as JSON ({e}). Fix: give strings, "
                         "numbers, booleans, lists and mappings only") from None


# ---- object-store errors in one line ---------------------------------------------------------

def _endpoint(options: dict) -> str:
    ep = (options.get("endpoint_url") or (options.get("client_kwargs") or {}).get("endpoint_url")
          or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))
    return f"the endpoint {ep}" if ep else "AWS S3 (no endpoint_url or AWS_ENDPOINT_URL set)"


def _chain(e):
    seen = []
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    return seen


def _from_object_store(e) -> bool:
    return type(e).__module__.split(".")[0] in ("botocore", "aiobotocore", "aiohttp", "s3fs")


def _kind(e) -> str | None:
    """What an exception (or one it was raised from) says about an object store: "unreachable",
    "credentials", "bucket", "denied", or None (not an object-store error we can word)."""
    chain = _chain(e)
    names = {type(x).__name__ for x in chain}
    if names & {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                "ProfileNotFound", "NoAuthTokenError"}:
        return "credentials"
    if names & {"EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ProxyConnectionError",
                "ClientConnectorError", "ServerDisconnectedError", "ReadTimeoutError"}:
        return "unreachable"
    if not any(_from_object_store(x) for x in chain):
        return None
    text = " ".join(str(x) for x in chain)
    if "NoSuchBucket" in names or "bucket does not exist" in text:
        return "bucket"
    if any(isinstance(x, PermissionError) for x in chain) or names & {"AccessDenied", "InvalidAccessKeyId",
                                                                       "SignatureDoesNotMatch"}:
        return "denied"
    return None


def object_store_message(e, urls) -> str | None:
    """One line for an error an object store gave a command (no traceback): the URL, what happened
    and the fix; None when ``e`` is not such an error or none of ``urls`` is at an object store."""
    kind = _kind(e)
    stores = [u for u in urls if isinstance(u, str) and _URL.match(u) and
              u.split("://", 1)[0].lower() not in LOCAL_LIKE_PROTOCOLS]
    if kind is None or not stores:
        return None
    text = " ".join(str(x) for x in _chain(e))
    url = next((u for u in stores if u.split("://", 1)[1].split("/", 1)[0] in text), stores[0])
    return _message(kind, url, storage_options_for(url), e)


def storage_options_for(url: str) -> dict:
    protocol = url.split("://", 1)[0].lower()
    return {**_DEFAULT_OPTIONS.get(protocol, {}), **storage_options()}


def _message(kind: str, url: str, options: dict, e) -> str:
    bucket = url.split("://", 1)[1].split("/", 1)[0]
    where = _endpoint(options)
    why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    set_ep = ("AWS_ENDPOINT_URL, or endpoint_url in --storage-options or in the cluster profile's "
              "storage_options")
    if kind == "unreachable":
        return (f"{url}: cannot reach the object store at {where} ({why}). Fix: check the endpoint ({set_ep}) and "
                "that the server is up and reachable from this machine, then rerun the same command (work already "
                "finished is kept)")
    if kind == "credentials":
        return (f"{url}: no credentials for {where} ({why}). Fix: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or AWS_PROFILE (or \"profile\" in --storage-options or the profile's storage_options); for a public "
                "bucket that is only read, use --storage-options '{\"anon\": true}'")
    if kind == "bucket":
        return (f"{url}: the bucket {bucket!r} does not exist at {where}. Fix: create it first (e.g. aws s3 mb "
                f"s3://{bucket}, with --endpoint-url for a server other than AWS) or correct the URL")
    return (f"{url}: access denied by {where} ({why}). Fix: use credentials that may list, read and write "
            f"s3://{bucket} (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE or \"profile\" in the storage "
            "options), or a bucket they may write")


_reachable: set = set()


def check_reachable(loc):
    """Ask the endpoint about ``loc``'s bucket once per process (one HEAD request, one attempt, 10 s
    at most to connect): an unreachable endpoint, missing credentials or a missing bucket raise
    :class:`StoreError` with the URL and the fix before any work. A refusal (403) passes: credentials
    may write objects without being allowed to ask about the bucket, and a real refusal is worded
    when it happens (:func:`object_store_message`)."""
    bucket = loc.root.split("/", 1)[0]
    key = (loc.protocol, bucket, json.dumps(loc._options, sort_keys=True, default=str),
           os.environ.get("AWS_ENDPOINT_URL"), os.environ.get("AWS_ENDPOINT_URL_S3"),
           os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_PROFILE"))
    if key in _reachable or not bucket:
        return
    config = {**(loc._options.get("config_kwargs") or {}), "connect_timeout": 10,
              "retries": {"max_attempts": 1, "mode": "standard"}}
    try:
        loc.fs.connect()  # the location's own client, needed anyway: the check shares its session (loaded models)
        fs = type(loc.fs)(**{**loc._options, "config_kwargs": config, "skip_instance_cache": True,
                             "session": loc.fs.session})
        fs.retries = 1
        fs.call_s3("head_bucket", Bucket=bucket)
    except Exception as e:  # noqa: BLE001  (worded below, or left to the command)
        kind = _kind(e)
        if kind == "bucket" or isinstance(e, FileNotFoundError):
            kind = "bucket"
        if kind in ("unreachable", "credentials", "bucket"):
            raise StoreError(_message(kind, loc.url, loc._options, e)) from None
    _reachable.add(key)


def is_url(x) -> bool:
    """True when ``x`` is a string of the form ``scheme://...`` or a chained fsspec URL
    ``scheme::...`` (a ``Path`` never is)."""
    return isinstance(x, str) and (bool(_URL.match(x)) or is_chained(x))


def is_chained(x) -> bool:
    """True for a chained fsspec URL: ``simplecache::s3://b/g.zarr``, ``zip::file://...``, or a URL
    with ``::`` in it (fsspec would read either as a chain). ``notes::draft`` is a local name unless
    ``notes`` is an fsspec protocol."""
    if not isinstance(x, str):
        return False
    m = _CHAINED.match(x)
    if m:
        return m.group(1).lower() in fsspec.available_protocols() or "://" in x
    return bool(_URL.match(x)) and "::" in x


def _refuse_chained(x: str):
    inner = x.rsplit("::", 1)[-1]
    inner = inner if _URL.match(inner) else None
    fix = (f"give the store's own URL ({inner})" if inner else "give the store's own URL (s3://bucket/g.zarr, "
           "file:///shared/g.zarr, ...)")
    raise StoreError(f"store URL {x}: chained URLs (LAYER::URL) are not supported for stores: a cache layer in front "
                     f"of a store that is being written serves stale objects, and the layers cannot append or lock. "
                     f"Fix: {fix}")


def location(x: str | os.PathLike[str] | LocalLocation | FsspecLocation) -> LocalLocation | FsspecLocation:
    """The :class:`LocalLocation` or :class:`FsspecLocation` of a path, URL or location.

    Raises
    ------
    StoreError
        A URL whose scheme has no installed fsspec filesystem (the message names the package), a
        chained URL, bad storage options, or an object store that cannot be reached
        (:func:`check_reachable`).
    """
    if isinstance(x, (LocalLocation, FsspecLocation)):
        return x
    if is_chained(x):
        _refuse_chained(x)
    return FsspecLocation(x) if is_url(x) else LocalLocation(x)


def disk_summary(path) -> str:
    """The mount point holding the local ``path`` and its free space, e.g. "/data (12 KB free of 2.0 GB)"."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        p = os.path.dirname(p)
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    try:
        u = shutil.disk_usage(p)
    except OSError:
        return p

    def size(n):
        return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n // 1024} KB"
    return f"{p} ({size(u.free)} free of {size(u.total)})"


def absolute(x) -> str:
    """``x`` as a task sent to another process names it: a URL as given, a local path made absolute
    against this process's working directory (without resolving symbolic links), so a worker
    started in another directory opens the same file. The driver calls it before any task leaves."""
    if isinstance(x, (LocalLocation, FsspecLocation)):
        x = x.path if isinstance(x, LocalLocation) else x.url
    return x if is_url(str(x)) else os.path.abspath(os.fspath(x))


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


def _zarr_metadata(doc: dict):
    """Parse a ``zarr.json`` document as Zarr does when it opens the node; raises on anything Zarr
    would refuse later with an error of its own (a damaged key, codec, data type or chunk grid)."""
    from zarr.core.group import GroupMetadata
    from zarr.core.metadata.v3 import ArrayV3Metadata

    kind = doc.get("node_type")
    if kind == "array":
        ArrayV3Metadata.from_dict(dict(doc))
    elif kind == "group":
        GroupMetadata.from_dict(dict(doc))
    else:
        raise ValueError(f"node_type {kind!r}")


def unreadable_metadata(loc, rel: str = "", depth: int = 5) -> list:
    """The ``zarr.json`` files of the store at ``loc`` (its groups and arrays, ``depth`` levels
    down) that are not valid JSON objects or not metadata Zarr can open (a flipped bit in a key,
    a codec name, a data type), as paths relative to the store."""
    if isinstance(loc, FsspecLocation) and not loc.exclusive and not rel:
        return _unreadable_listed(loc, depth)
    bad = []
    meta = f"{rel}zarr.json"
    try:
        doc = json.loads(loc.read_bytes(meta))
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        _zarr_metadata(doc)
    except FileNotFoundError:
        return bad
    except Exception:  # noqa: BLE001  (Zarr's parser raises TypeError, ValueError, KeyError, ... on damage)
        bad.append(meta)
    if depth:
        for name in sorted(loc.listdir(rel)):
            if not name.startswith(".") and loc.exists(f"{rel}{name}/zarr.json"):
                bad += unreadable_metadata(loc, f"{rel}{name}/", depth - 1)
    return bad


def _unreadable_listed(loc, depth: int) -> list:
    """:func:`unreadable_metadata` on an object store: the same ``zarr.json`` files (those of
    nodes reached from the root through nodes that have one), found by one recursive listing
    and read concurrently, instead of a request or two per node one after the other (on S3 an
    absent key costs a HEAD and a LIST: the walk of a 22-shard corpus store took 700 requests)."""
    root = loc.root
    try:
        keys = loc.fs.find(root)  # one flat listing (1,000 keys a request); s3fs walks folder by folder with maxdepth
    except FileNotFoundError:
        return []
    finally:
        loc.fs.invalidate_cache()  # s3fs keeps every folder's listing from it: stores change while written
    rels = [k[len(root) + 1:] for k in keys if k.startswith(root + "/")]
    rels = [r for r in rels if r.count("/") <= depth]
    metas = [r for r in rels if (r == "zarr.json" or r.endswith("/zarr.json"))
             and not any(part.startswith(".") for part in r.split("/")[:-1])]
    nodes = {m[:-len("zarr.json")].rstrip("/") for m in metas}
    if "" not in nodes:
        return []  # no root metadata: not a store (the caller says so)

    def reached(m):
        parts = m.split("/")[:-1]
        return all("/".join(parts[:i]) in nodes for i in range(len(parts)))

    metas = ["zarr.json"] + sorted(m for m in metas if m != "zarr.json" and reached(m))
    paths = [f"{root}/{m}" for m in metas]
    got = loc.fs.cat(paths, on_error="return")
    got = {str(k).rstrip("/"): v for k, v in got.items()}
    bad = []
    for m, path in zip(metas, paths):
        data = got.get(path)
        if data is None or isinstance(data, FileNotFoundError):
            continue
        if isinstance(data, BaseException):
            raise data
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            _zarr_metadata(doc)
        except Exception:  # noqa: BLE001  (Zarr's parser raises TypeError, ValueError, KeyError, ... on damage)
            bad.append(m)
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
        if not local_like:
            self._options = {**_DEFAULT_OPTIONS.get(self.protocol, {}), **storage_options()}
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self._base, **self._options)
        except (TypeError, ValueError) as e:
            raise StoreError(f"store URL {url}: the storage options {json.dumps(storage_options())} are not valid for "
                             f"{self.protocol}:// ({e}). Fix: correct --storage-options, the profile's "
                             f"storage_options or ${OPTIONS_ENV}") from None
        self.root = self.root.rstrip("/") or self.root
        self.exclusive = self.appendable = local_like
        #: memory:// lives in this process only: worker processes cannot see it
        self.process_local = self.protocol == "memory"
        self._zarr = None
        if self.protocol in _S3:
            check_reachable(self)

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

    def writer_store(self):
        """The Zarr store for the one writer of the store here (it holds, or is about to take, the
        store's lock): a :class:`WriterCache` over :meth:`zarr_store`."""
        if self.protocol in ("file", "local"):
            via = AtomicLocalFileSystem(auto_mkdir=True)  # each object replaced atomically, as zarr_store does
        else:
            via = self.fs
        return WriterCache(self.zarr_store(), sender=(via, self.root))

    def exists(self, rel: str = "") -> bool:
        return bool(self.fs.exists(self._p(rel)))

    def listdir(self, rel: str = "") -> list:
        try:
            self.fs.invalidate_cache(self._p(rel))  # never an old listing: other processes write here
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


# ---- one writer's view of a store at a URL -----------------------------------------------------

_GONE = object()  # a key deleted in the open batch


class WriterCache(WrapperStore):
    """The Zarr store of the one writer of a store at a URL: fewer requests, sent concurrently and
    behind the writer's back, in order.

    Zarr's array and group calls make many small requests, one after the other: creating one
    array of a corpus shard reads the metadata of each of its parent groups, asks whether each
    exists (on S3 a HEAD and a LIST for every absent key) and lists the array's prefix before
    its two PUTs, so a shard of a corpus store took about 160 sequential requests (2.2 s on a
    loopback S3 server). The writer holds the store's lock, so nobody else changes what it
    reads, and this wrapper may remember:

    - every ``zarr.json`` it read or wrote (or found absent),
    - the complete contents of the prefixes named in :meth:`learn` or :meth:`assume_empty`, so
      that existence checks, ``is_empty`` and ``delete_dir`` below them need no request,
    - the latest values of other objects it wrote or read (at most ``value_bytes`` in all; a
      growing vocabulary's last chunk is read back by every shard).

    Writes are sent in groups, strictly one group after the other, by one sender thread: a write
    outside a batch is a group of one; inside ``with cache.batch():`` writes and deletes are only
    recorded (reads see them) and become one group when the block ends, whose objects are sent
    ``concurrency`` at a time. A group is sent only after every object of the groups before it
    has landed, so a "done" flag written after a batch lands after the batch's objects. The
    writer does not wait for its groups (at most ``depth`` are in flight), so the requests
    overlap the writer's own work; a read that this wrapper cannot answer from memory waits for
    every group first. A group that fails stops the sending: nothing after it is sent, and the
    error is raised by the writer's next write, by :meth:`drain` or by :meth:`close`. A batch
    that raises sends nothing. :meth:`close` sends what is left and forgets everything (the lock
    is released after it).
    """

    def __init__(self, store, value_bytes: int = 64 * 2**20, concurrency: int = 32, depth: int = 4, sender=None):
        super().__init__(store)
        #: (fsspec filesystem, root path) that the sender thread writes through, on fsspec's own I/O
        #: loop: the requests then never hold up Zarr's event loop, which the writer's own reads and
        #: writes wait on. None: through the wrapped store, on Zarr's loop.
        self._via = sender
        self._meta: dict = {}  # key -> bytes, or None (absent)
        self._values: OrderedDict = OrderedDict()  # key -> bytes (LRU)
        self._value_bytes = 0
        self._value_limit = value_bytes
        self._known: dict = {}  # prefix -> set of every key under it
        self._pending: dict | None = None  # key -> bytes or _GONE, inside a batch
        self.concurrency = concurrency
        self.depth = depth
        self._inflight: deque = deque()  # concurrent futures of the groups sent, oldest first
        self._sender = None
        self._error: BaseException | None = None
        self.enabled = True

    def _with_store(self, store):
        return type(self)(store, self._value_limit, self.concurrency, self.depth, self._via)

    def __str__(self):
        return str(self._store)

    # -- what is known

    def _prefix_of(self, key: str):
        for p in self._known:
            if key.startswith(p + "/"):
                return p
        return None

    def _remember(self, key: str, data):
        """Record ``key``'s current content (bytes, or None: absent)."""
        if not self.enabled:
            return
        p = self._prefix_of(key)
        if p is not None:
            (self._known[p].add if data is not None else self._known[p].discard)(key)
        if key.endswith("zarr.json"):
            self._meta[key] = data
            return
        self._forget(key)
        if data is not None and len(data) <= self._value_limit // 8:
            self._values[key] = data
            self._value_bytes += len(data)
            while self._value_bytes > self._value_limit:
                self._value_bytes -= len(self._values.popitem(last=False)[1])

    def _forget(self, key):
        self._meta.pop(key, None)
        old = self._values.pop(key, None)
        if old is not None:
            self._value_bytes -= len(old)

    def _forget_all(self):
        self._meta.clear()
        self._values.clear()
        self._value_bytes = 0
        self._known.clear()

    def _lookup(self, key: str):
        """(known, bytes or None) of ``key`` from what this writer has seen."""
        if self._pending is not None and key in self._pending:
            v = self._pending[key]
            return True, None if v is _GONE else v
        if key in self._meta:
            return True, self._meta[key]
        if key in self._values:
            self._values.move_to_end(key)
            return True, self._values[key]
        p = self._prefix_of(key)
        if p is not None and key not in self._known[p]:
            return True, None
        return False, None

    def learn(self, prefixes):
        """List each of ``prefixes`` (concurrently) and keep its complete contents from now on."""
        prefixes = [p.rstrip("/") for p in prefixes if p.rstrip("/") not in self._known]
        if not self.enabled or not prefixes:
            return
        self.drain()

        async def one(p):
            return p, {k async for k in self._store.list_prefix(p + "/")}

        async def all_():
            return await asyncio.gather(*(one(p) for p in prefixes))

        for p, keys in zarr_sync(all_()):
            self._known[p] = keys

    def assume_empty(self, prefixes):
        """Take ``prefixes`` as holding nothing, without a listing (the caller knows, e.g. from a
        manifest written before anything under them)."""
        if self.enabled:
            for p in prefixes:
                self._known[p.rstrip("/")] = set()

    def unlearn(self, prefixes):
        """Stop keeping the contents of ``prefixes`` (a writer done with them)."""
        for p in prefixes:
            self._known.pop(p.rstrip("/"), None)

    def forget_values(self):
        """Drop the remembered object values (metadata stays): the next reads go to the store."""
        self._values.clear()
        self._value_bytes = 0

    # -- sending

    def _raise_error(self):
        if self._error is not None:
            raise self._error

    def _submit(self, group: dict):
        """Send ``group`` after every group before it (one sender thread); wait only while
        ``depth`` groups are in flight."""
        self._raise_error()
        if not group:
            return
        if not self.enabled:
            zarr_sync(self._send(group))
            return
        if self._sender is None:
            from concurrent.futures import ThreadPoolExecutor

            self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gramtile-store-writer")
        self._inflight.append(self._sender.submit(self._send_in_order, group))
        while len(self._inflight) > self.depth:
            self._settle(self._inflight[0].result)

    def _send_in_order(self, group):
        if self._error is not None:
            return  # an earlier group failed: send nothing after it
        try:
            if self._via is None:
                zarr_sync(self._send(group))
            else:
                self._send_via(group)
        except BaseException as e:
            self._error = e
            raise

    def _send_via(self, group: dict):
        fs, root = self._via
        gone = [f"{root}/{k}" for k, v in group.items() if v is _GONE]
        if gone:  # deletes first, as in _send
            try:
                fs.rm(gone)  # one bulk request on S3
            except FileNotFoundError:
                for path in gone:
                    try:
                        fs.rm_file(path)
                    except FileNotFoundError:
                        pass
        puts = {f"{root}/{k}": v for k, v in group.items() if v is not _GONE}
        if len(puts) == 1:
            fs.pipe_file(*next(iter(puts.items())))
        elif puts:
            fs.pipe(puts)  # concurrent on async filesystems (s3fs, gcsfs, ...)

    def _settle(self, wait):
        """Wait for the oldest group; on its failure remember nothing of what may not have landed."""
        try:
            wait()
        except BaseException:
            self._forget_all()
            self._raise_error()
            raise
        finally:
            self._inflight.popleft()

    def drain(self):
        """Wait until every group has landed; raise the error of the first that failed."""
        while self._inflight:
            self._settle(self._inflight[0].result)
        self._raise_error()

    async def _drained(self):
        """:meth:`drain` from the event loop (the sender needs the loop, so it is not blocked)."""
        while self._inflight:
            fut = self._inflight[0]
            try:
                await asyncio.wrap_future(fut)
            except BaseException:
                self._forget_all()
                if self._inflight and self._inflight[0] is fut:
                    self._inflight.popleft()
                self._raise_error()
                raise
            if self._inflight and self._inflight[0] is fut:
                self._inflight.popleft()
        self._raise_error()

    async def _send(self, group: dict):
        sem = asyncio.Semaphore(self.concurrency)
        proto = default_buffer_prototype()

        async def one(key, v):
            async with sem:
                if v is _GONE:
                    await self._store.delete(key)
                else:
                    await self._store.set(key, proto.buffer.from_bytes(v))

        # deletes first: a group that deletes a prefix and writes into it again keeps the writes
        await asyncio.gather(*(one(k, v) for k, v in group.items() if v is _GONE))
        await asyncio.gather(*(one(k, v) for k, v in group.items() if v is not _GONE))

    @contextmanager
    def batch(self):
        """Record writes and deletes; send them as one group when the block ends."""
        if self._pending is not None:
            yield self
            return
        self._raise_error()
        self._pending = {}
        try:
            yield self
        except BaseException:
            # nothing sent: forget what the block recorded (it is not in the store)
            pending, self._pending = self._pending, None
            for key in pending:
                self._forget(key)
            self._known.clear()
            raise
        pending, self._pending = self._pending, None
        self._submit(pending)

    def close(self):
        """Send what is left (raising the first error), then forget everything."""
        try:
            self.drain()
        finally:
            if self._sender is not None:
                self._sender.shutdown(wait=True)
                self._sender = None
            self._forget_all()
            self.enabled = False

    # -- the Store methods

    async def _flush(self):
        """Before a request this wrapper cannot answer: send a batch's records, and wait for every group."""
        if self._pending:
            pending, self._pending = self._pending, {}
            await self._drained()
            await self._send(pending)
        await self._drained()

    async def _get_many(self, requests):
        for key, prototype, byte_range in requests:
            yield key, await self.get(key, prototype, byte_range)

    async def _set_many(self, values):
        for k, v in values:
            await self.set(k, v)

    async def get(self, key, prototype=None, byte_range=None):
        prototype = prototype or default_buffer_prototype()
        if byte_range is None:
            known, data = self._lookup(key)
            if known:
                return None if data is None else prototype.buffer.from_bytes(data)
        await self._flush()
        value = await self._store.get(key, prototype, byte_range)
        if byte_range is None:
            self._remember(key, None if value is None else value.to_bytes())
        return value

    async def get_partial_values(self, prototype, key_ranges):
        await self._flush()
        return await self._store.get_partial_values(prototype, key_ranges)

    async def exists(self, key):
        known, data = self._lookup(key)
        if known:
            return data is not None
        await self._flush()
        there = await self._store.exists(key)
        if not there:
            self._remember(key, None)
        return there

    async def set(self, key, value, byte_range=None):
        if byte_range is not None:
            await self._flush()
            self._forget(key)
            return await self._store.set(key, value, byte_range)
        data = value.to_bytes()
        if self._pending is not None:
            self._pending[key] = data
        else:
            self._raise_error()
            self._inflight_submit({key: data})
        self._remember(key, data)

    def _inflight_submit(self, group):
        # called on the event loop: never block it waiting for the sender (which needs the loop)
        self._raise_error()
        if not self.enabled:
            raise StoreError("a closed WriterCache cannot write")
        if self._sender is None:
            from concurrent.futures import ThreadPoolExecutor

            self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gramtile-store-writer")
        self._inflight.append(self._sender.submit(self._send_in_order, group))

    async def set_if_not_exists(self, key, value):
        if not await self.exists(key):
            await self.set(key, value)

    async def delete(self, key):
        if self._pending is not None:
            self._pending[key] = _GONE
        else:
            self._inflight_submit({key: _GONE})
        self._remember(key, None)

    async def delete_dir(self, prefix):
        prefix = prefix.rstrip("/")
        p = self._prefix_of(prefix + "/") if prefix else None
        if p is None and prefix in self._known:
            p = prefix
        if p is not None:
            under = [k for k in self._known[p] if k.startswith(prefix + "/")]
            under += [k for k, v in (self._pending or {}).items() if v is not _GONE and k.startswith(prefix + "/")]
            for k in set(under):
                await self.delete(k)
            return
        await self._flush()
        for k in [k for k in (*self._meta, *self._values) if k.startswith(prefix + "/") or not prefix]:
            self._forget(k)
        await self._store.delete_dir(prefix)
        if prefix:
            self._known[prefix] = set()

    async def is_empty(self, prefix):
        bare = prefix.rstrip("/")
        p = self._prefix_of(bare + "/") or (bare if bare in self._known else None)
        if p is not None:
            return not any(k.startswith(bare + "/") for k in self._known[p])
        await self._flush()
        return await self._store.is_empty(prefix)

    def list(self):
        return self._listing(self._store.list)

    def list_prefix(self, prefix):
        return self._listing(self._store.list_prefix, prefix)

    def list_dir(self, prefix):
        return self._listing(self._store.list_dir, prefix)

    async def _listing(self, fn, *args):
        await self._flush()
        async for k in fn(*args):
            yield k
