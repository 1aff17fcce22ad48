"""The corpus store: parsed, encoded examples in a sharded Zarr v3 group on disk.

Layout::

    CORPUS.zarr/
      zarr.json            attributes: "manifest" (below)
      ids                  string array (n,), chunks = shard_size
      labels               string array (n,): each example's label as plain text (manifest
                           "labels_encoding": "text"; "" when absent; a label that is not a
                           plain string, e.g. a list, is NUL + its JSON); stores written before
                           the key existed hold the JSON of each label (and still read)
      texts, sources       string arrays (n,): JSON of each example's text / source ("null" when absent);
                           in a store of fields, the text is the JSON object {field: text} in field order
      targets              float64 array (n,): each example's real-valued target (only in a store
                           whose examples carry one; manifest "targets": true)
      groups               string array (n,): each example's group id (only in a store whose examples
                           carry one; manifest "groups": true)
      vocab/sym, vocab/prod, vocab/pprod
                           string arrays: Vocabularies.to_dict(), append-only
      reps/<name>/<k>/     one group per representation and shard k, holding
                           Batch.arrays(): "offsets" (int64) and the kind's node columns
                           (int32; "weight" of bags float64). In a store of fields, <name> is
                           <field>.<representation> ("question.ptree"): every field's text has the
                           representations a single text has, each under a key of its own
      resources/<name>-<param hash>/
                           corpus resources (similarity matrices, domain spaces) built after
                           completion, with provenance and content hash (pipeline/resources/build.py)
      features/<kind>-<param hash>/
                           explicit feature sets of kernels with a feature map: the corpus-level
                           feature vocabulary, frequencies and rows per shard
                           (pipeline/compute/feature_sets.py), built by the Gram engine's driver
      .lock                held by the one writer (pid and host; at a URL also a token)

A store can be written and read at an fsspec URL (``s3://bucket/c.zarr``,
``file:///shared/c.zarr``) as well as at a path: every byte goes through
:mod:`gramtile.pipeline.stores.storage` (Zarr's ``FsspecStore`` at a URL, the path string otherwise),
and the writer lock is a :class:`~gramtile.pipeline.stores.locks.UrlLock` there.

Bags (``dict`` feature -> weight structures, e.g. KeLP's ``bow``) are batches of kind
``"bag"``: ``offsets`` (n+1,), ``feat`` (sym-vocabulary ids, sorted per example) and
``weight`` (float64). ``load("bow", a, b)`` returns such a batch; :func:`bag_arrays` is the
small loader for code that wants the three CSR arrays.

Manifest (group attribute ``manifest``)::

    {format_version, gramtile_version, source, input_format, shard_size,
     n_examples (None while incomplete), complete,
     shards: [{index, start, stop, done, vocab_sizes, run}],
     representations: {name: kind}, parser: {model, model_version, spacy_version} or None,
     content_hash (None while incomplete), skipped: [{source, error}], options,
     runs: [{run, started, finished, parsed_shards, reused_shards, cluster, ...}],
     expected_shards (prepare's estimate from the input, or None)}

plus, in a store whose examples carry them (and only there, so a store of single texts is laid
out as before): ``fields`` (the field names, in order), ``targets: true``, ``groups: true``.

Fields: an example of several texts (:attr:`Document.fields`, e.g. ``question`` and ``answer``)
has each text parsed and given its representations exactly as a single text is, stored under
the representation key ``<field>.<representation>``
(:mod:`gramtile.pipeline.representations.fields`): ``load("question.ptree", a, b)`` reads the
``ptree`` of field ``question`` as ``load("ptree", a, b)`` reads a single-text store's.

Crash safety: a shard is written in this order — its manifest entry with ``done: false``,
its arrays, its ids/labels/texts/sources, the vocabulary strings it added, and only then its
``done: true`` flag together with the vocabulary sizes after it. Each Zarr metadata write is
atomic (write-then-rename at paths and file:// URLs, one PUT on object stores), so a killed
writer leaves at worst an entry with ``done: false``. At a URL the writer goes through a
:class:`~gramtile.pipeline.stores.storage.WriterCache`: a shard's objects are sent together,
concurrently, while the next shard is read and encoded, but in the same order (each group only
after the one before it has landed), so the same holds. Two things save requests there: a
shard's ``done: true`` flag is not a write of its own but goes out with the next manifest write
(the next shard's entry, or the end of the run), still after the shard's objects; and the
ids/labels/texts/sources and vocabulary arrays grow ahead of the shards (their capacity doubled,
by at most 64 shards or chunks at a time, or at once to the length prepare expects from its
input) instead of one metadata write each per shard, and are
cut to the stored length when the store is completed. Readers read them only up to the done
shards' lengths, so the room ahead is never read.
Shards are written strictly in order, so the done shards are always a prefix; on reopening,
the vocabularies are cut to the sizes recorded with the last done shard and the next shard
overwrites whatever a killed run left behind. Ids are therefore deterministic.

The content hash (sha256) is computed when the store is completed, by reading back every
stored array (at a URL, the objects the writer sent in this run and still holds in memory, at
most 64 MB, are read from there: the bytes it sent, whose upload the object store checked,
decoded by Zarr as a read from the store would be). It covers the ids, labels, texts, vocabularies, the kind of each
representation, its per-example sizes and node columns, but not the source path, the run
history, ``resources/`` or ``features/`` (adding either keeps every Gram store of the corpus valid),
and, in a store that has them, the field names, the targets and the group ids, so the same input prepared twice (with the same shard size, which fixes the order in
which vocabulary ids are assigned) hashes equal, however the runs were interrupted.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict, deque
from contextlib import nullcontext
from datetime import datetime, timezone
from importlib.metadata import version

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from gramtile.kernels.batches import KIND_COLUMNS, Batch
from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline.representations.encode import decode, encode, kind_of
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.fields import check_field_names, split_key
from gramtile.pipeline.representations.structures import Document
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError, StoreLockedError, StoreMismatchError
from gramtile.pipeline.stores.storage import FsspecLocation, check_metadata, location

#: 2: the ``prod`` column of ordered trees holds label-only productions (a node's label and its
#: children's labels); version 1 stores told leaf children from internal ones there, and
#: are refused rather than read with the old keys
FORMAT_VERSION = 2
_COMPRESSORS = (ZstdCodec(level=3), Crc32cCodec())
_TEXT_ARRAYS = ("ids", "labels", "texts", "sources")
#: Per-example arrays only stores whose examples carry them hold (manifest key -> dtype).
_OPTIONAL_ARRAYS = {"targets": np.float64, "groups": str}
#: At a URL the text and vocabulary arrays grow ahead by at most this many chunks at a time
GROW_CHUNKS = 64


def _grown(size: int, need: int, chunk: int, expected: int | None = None) -> int:
    """The new length of an array of ``size`` that must hold ``need``: doubled, by at most
    :data:`GROW_CHUNKS` chunks, and at least ``need``; at once to ``expected`` (the length the
    input is expected to give) when that is within :data:`GROW_CHUNKS` chunks of ``need``."""
    new = max(need, size + min(max(size, chunk), GROW_CHUNKS * chunk))
    if expected:
        new = max(new, min(int(expected), need + GROW_CHUNKS * chunk))
    return new
LABELS_ENCODING = "text"  # new stores; a manifest without the key means "json" (older stores)


def encode_label(label, encoding: str = LABELS_ENCODING) -> str:
    """A label as stored: plain text (``None`` -> ``""``; a non-string or a string that is empty
    or starts with NUL -> NUL + JSON), or the JSON of it under the old ``"json"`` encoding."""
    if encoding == "json":
        return json.dumps(label, ensure_ascii=False)
    if label is None:
        return ""
    if isinstance(label, str) and label and not label.startswith("\x00"):
        return label
    return "\x00" + json.dumps(label, ensure_ascii=False)


def decode_label(s: str, encoding: str = LABELS_ENCODING):
    """Inverse of :func:`encode_label`."""
    if encoding == "json":
        return json.loads(s)
    if s == "":
        return None
    if s.startswith("\x00"):
        return json.loads(s[1:])
    return s
#: Shards kept decoded in memory per store object (tiles reuse a row shard many times).
CACHE_SHARDS = 8


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def bag_arrays(batch: Batch) -> tuple:
    """The CSR arrays of a ``"bag"`` batch.

    Returns
    -------
    offsets : ndarray of int64, shape (n+1,)
    feat : ndarray of int32, shape (nnz,)
        Feature ids in the ``sym`` vocabulary, increasing within each example.
    weight : ndarray of float64, shape (nnz,)
    """
    if batch.kind != "bag":
        raise StoreError(f"bag_arrays needs a batch of kind 'bag', got {batch.kind!r}")
    return batch.offsets, batch.columns["feat"], batch.columns["weight"]


def _split_source(src):
    """``"path:line"`` -> (path, line) for error messages."""
    if not src:
        return None, None
    path, _, line = str(src).rpartition(":")
    if path and line.isdigit():
        return path, int(line)
    return src, None


def _ahead(fn, items, depth: int = 16):
    """``fn(item)`` for each of ``items``, in order, computed up to ``depth`` items ahead on a few
    threads: a store at a URL answers many small reads at once, not one after the other."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        window = deque()
        for item in items:
            window.append(pool.submit(fn, item))
            if len(window) >= depth:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()


def _writer_store(loc):
    """The writer's Zarr store at a URL (:meth:`~gramtile.pipeline.stores.storage.FsspecLocation.writer_store`);
    None at a path, where Zarr gets the path string as always."""
    return loc.writer_store() if isinstance(loc, FsspecLocation) else None


def corpus_group(corpus_path, mode: str = "r"):
    """The Zarr group of the corpus store at ``corpus_path`` (for the data kept inside it: resources,
    feature sets), or a StoreError naming the fix when there is none."""
    loc = location(corpus_path)
    if not loc.exists("zarr.json"):
        raise StoreError(f"no corpus store at {loc}. Fix: create it with `gramtile prepare --out {loc}`")
    return zarr.open_group(loc.zarr_store(), mode=mode)


#: How long a driver waits for another process's build of data kept in a corpus store (resources,
#: feature sets: the corpus store's lock) before failing.
LOCK_WAIT_SECONDS = 600.0


def corpus_lock(corpus_path, wait: float):
    """Take the corpus store's writer lock (``.lock``) for adding derived data (resources, feature
    sets), waiting up to ``wait`` seconds for another writer; returns the held lock."""

    lock = location(corpus_path).lock(".lock", f"corpus store {corpus_path}")
    deadline = time.monotonic() + wait
    while True:
        try:
            return lock.acquire()
        except StoreLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


class CorpusStore:
    """A corpus store on disk (layout, manifest and write order in the module docstring).

    Use :meth:`create` or :meth:`open`; ``open(path)`` is read-only. Readers (the Gram engine)
    use :attr:`n`, :attr:`ids`, :attr:`labels`, :attr:`representations`, :attr:`vocabs`,
    :attr:`content_hash`, :attr:`shard_ranges` and :meth:`load`; a store of examples made of
    several texts also answers :attr:`fields` and :meth:`field_representations` (a field's
    representation ``r`` is loaded as ``load("<field>.r", a, b)``), and :attr:`targets` and
    :attr:`groups` return the real-valued targets and the group ids (None in a store without).
    """

    def __init__(self, group, path, writable: bool, lock=None, cache=None):
        self._g = group
        #: the writer's :class:`~gramtile.pipeline.stores.storage.WriterCache` at a URL, else None
        self._writer = cache
        self.path = path
        self.writable = writable
        self._lock = lock
        try:
            self._manifest = json.loads(json.dumps(group.attrs["manifest"]))
        except KeyError:
            raise StoreCorruptError(f"{path} is a Zarr group without a gramtile manifest; "
                                    "it is not a corpus store. Fix: point at a store made by `gramtile prepare`") from None
        fv = self._manifest.get("format_version")
        if fv != FORMAT_VERSION:
            why = (" (version 2 stores tree productions by labels only, as the SST kernel now compares them)"
                   if fv == 1 else "")
            raise StoreMismatchError(f"{path} has corpus store format version {fv}, this gramtile reads "
                                     f"version {FORMAT_VERSION}{why}. Fix: prepare the corpus again into a new store")
        self._vocabs = None
        self._unsaved = False  # a done flag not yet written (at a URL: sent with the next manifest write)
        self._cache: OrderedDict = OrderedDict()
        self._cache_lock = threading.Lock()  # executors may load from several threads

    # ---- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, path, *, source=None, input_format=None, shard_size: int = 1000, options=None,
               overwrite: bool = False) -> CorpusStore:
        """Create an empty, writable store at ``path``.

        Parameters
        ----------
        path : str or Path
            A local path or an fsspec URL (:mod:`gramtile.pipeline.stores.storage`).
        source : str, optional
            Input path, recorded in the manifest.
        input_format : str, optional
        shard_size : int
            Examples per shard (the last shard may be smaller).
        options : dict, optional
            Reading options to record (e.g. ``on_error``, ``max_tokens``).
        overwrite : bool
            Replace an existing store; otherwise an existing path is an error.
        """
        loc = location(path)
        path = loc.path
        if not isinstance(shard_size, int) or isinstance(shard_size, bool) or shard_size < 1:
            raise StoreError(f"shard_size={shard_size!r} must be a positive integer. Fix: pass e.g. --shard-size 1000")
        if loc.exists() and not overwrite:
            raise StoreMismatchError(f"{path} already exists. Fix: open it to resume, or choose another --out")
        cache = _writer_store(loc)
        group = zarr.open_group(cache or loc.zarr_store(), mode="w" if overwrite else "w-")
        manifest = {
            "format_version": FORMAT_VERSION, "gramtile_version": version("gramtile"),
            "source": None if source is None else str(source), "input_format": input_format,
            "shard_size": shard_size, "n_examples": None, "complete": False, "shards": [],
            "representations": {}, "parser": None, "content_hash": None, "skipped": [], "runs": [],
            "options": dict(options or {}), "created": now(), "labels_encoding": LABELS_ENCODING,
        }
        for name in _TEXT_ARRAYS:
            group.create_array(name, shape=(0,), dtype=str, chunks=(shard_size,), compressors=_COMPRESSORS)
        vg = group.require_group("vocab")
        for name in Vocabularies.NAMES:
            vg.create_array(name, shape=(0,), dtype=str, chunks=(65536,), compressors=_COMPRESSORS)
        group.require_group("reps")
        group.attrs["manifest"] = manifest
        lock = loc.lock(".lock", f"corpus store {path}")
        lock.acquire()
        return cls(group, path, True, lock, cache)

    @classmethod
    def open(cls, path, mode: str = "r") -> CorpusStore:
        """Open an existing store; ``mode="r"`` (default) reads, ``"r+"`` resumes writing.

        ``path`` may be an fsspec URL (:mod:`gramtile.pipeline.stores.storage`).
        """
        if mode not in ("r", "r+"):
            raise StoreError(f"mode={mode!r}; use 'r' to read or 'r+' to resume writing")
        loc = location(path)
        path = loc.path
        if not loc.exists("zarr.json"):
            raise StoreError(f"no corpus store at {path}. Fix: create it with `gramtile prepare --out {path}`")
        redo = f"delete {path} and rerun the `gramtile prepare` command that made it"
        check_metadata(loc, "corpus store", f"its description is lost; {redo}", redo)
        lock = cache = None
        if mode == "r+":
            lock = loc.lock(".lock", f"corpus store {path}")
            lock.acquire()
            cache = _writer_store(loc)
        group = zarr.open_group(cache or loc.zarr_store(), mode=mode)
        try:
            return cls(group, path, mode == "r+", lock, cache)
        except Exception:
            if lock:
                lock.release()
            raise

    def close(self):
        """Release the writer's lock (reading needs no close)."""
        try:
            if self._writer is not None:
                try:
                    if self._unsaved and self.writable:
                        self._save_manifest()  # the last shard's done flag (module docstring)
                finally:
                    self._writer.close()  # sends what is left; what it remembers holds only while the lock is held
        finally:
            if self._lock:
                self._lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- reading -------------------------------------------------------------------------

    @property
    def manifest(self) -> dict:
        """A copy of the manifest."""
        return json.loads(json.dumps(self._manifest))

    @property
    def complete(self) -> bool:
        return bool(self._manifest["complete"])

    def _done(self) -> list:
        return [s for s in self._manifest["shards"] if s["done"]]

    @property
    def n(self) -> int:
        """Number of stored examples (those of done shards while incomplete)."""
        done = self._done()
        return done[-1]["stop"] if done else 0

    @property
    def shard_ranges(self) -> list:
        """``[(start, stop), ...]`` of the done shards, in order."""
        return [(s["start"], s["stop"]) for s in self._done()]

    @property
    def representations(self) -> dict:
        """Representation name -> batch kind."""
        return dict(self._manifest["representations"])

    @property
    def content_hash(self):
        """sha256 hex digest of the stored content; None while incomplete."""
        return self._manifest["content_hash"]

    @property
    def parser(self):
        return self._manifest.get("parser")

    @property
    def vocabs(self) -> Vocabularies:
        """The vocabularies as of the last done shard."""
        if self._vocabs is None:
            done = self._done()
            sizes = done[-1]["vocab_sizes"] if done else {k: 0 for k in Vocabularies.NAMES}
            v = {}
            for name in Vocabularies.NAMES:
                size = sizes.get(name, 0)
                v[name] = self._g["vocab"][name][:size].tolist() if size else []
            self._vocabs = Vocabularies.from_dict(v)
        return self._vocabs

    def _strings(self, name, start=0, stop=None) -> list:
        stop = self.n if stop is None else stop
        if stop <= start:
            return []
        return self._g[name][start:stop].tolist()

    @property
    def ids(self) -> list:
        return self._strings("ids")

    def ids_between(self, start: int, stop: int) -> list:
        """The ids of examples ``start`` to ``stop - 1``, read alone (not every id of the store)."""
        return self._strings("ids", start, stop)

    @property
    def labels(self) -> list:
        enc = self.labels_encoding
        return [decode_label(s, enc) for s in self._strings("labels")]

    @property
    def fields(self) -> tuple:
        """The field names of a store of examples made of several texts, in order; ``()`` for a
        store of single texts."""
        return tuple(self._manifest.get("fields") or ())

    def field_representations(self, field: str) -> dict:
        """Representation name -> batch kind of field ``field``; each is stored under the key
        ``<field>.<name>`` (:func:`~gramtile.pipeline.representations.fields.field_key`)."""
        if field not in self.fields:
            raise StoreError(f"corpus store {self.path} has no field {field!r}; "
                             + (f"its fields are {list(self.fields)}" if self.fields else "it holds single texts"))
        out = {}
        for key, kind in self._manifest["representations"].items():
            f, rep = split_key(key, self.fields)
            if f == field:
                out[rep] = kind
        return out

    def _optional(self) -> tuple:
        """The optional per-example arrays this store holds (module docstring)."""
        return tuple(name for name in _OPTIONAL_ARRAYS if self._manifest.get(name))

    @property
    def targets(self):
        """Each example's real-valued target, float64 array (n,); None in a store without targets."""
        if not self._manifest.get("targets"):
            return None
        n = self.n
        return np.asarray(self._g["targets"][:n], dtype=np.float64) if n else np.zeros(0)

    @property
    def groups(self):
        """Each example's group id, array of str (n,); None in a store without groups."""
        if not self._manifest.get("groups"):
            return None
        return np.array(self._strings("groups"), dtype=object)

    @property
    def labels_encoding(self) -> str:
        """How the ``labels`` array holds labels: ``"text"`` (plain strings) or ``"json"`` (older stores)."""
        return self._manifest.get("labels_encoding", "json")

    def _check_range(self, start, stop):
        if not (0 <= start <= stop):
            raise StoreError(f"example range [{start}, {stop}) is invalid; need 0 <= start <= stop")
        if stop > self.n:
            more = "" if self.complete else " (the store is incomplete: rerun `gramtile prepare` to finish it)"
            raise StoreError(f"example range [{start}, {stop}) ends beyond the {self.n} stored examples{more}")

    def _shard_batch(self, rep: str, index: int) -> Batch:
        key = (rep, index)
        with self._cache_lock:
            b = self._cache.get(key)
            if b is not None:
                self._cache.move_to_end(key)
                return b
        kind = self._manifest["representations"][rep]
        g = self._g["reps"][rep][str(index)]
        arrays = {}
        for name in ("offsets",) + KIND_COLUMNS[kind]:
            a = g[name][:]
            a.setflags(write=False)  # cached and shared: callers must not modify it
            arrays[name] = a
        b = Batch.from_arrays(kind, arrays)
        with self._cache_lock:
            self._cache[key] = b
            while len(self._cache) > CACHE_SHARDS:
                self._cache.popitem(last=False)
        return b

    def load(self, rep: str, start: int, stop: int) -> Batch:
        """Examples ``start:stop`` of representation ``rep`` as one batch.

        Only the shards overlapping the range are read. Node ids refer to :attr:`vocabs`.

        Parameters
        ----------
        rep : str
            A name of :attr:`representations`.
        start, stop : int
            ``0 <= start <= stop <= n``.

        Returns
        -------
        Batch
            ``stop - start`` examples of kind ``representations[rep]``.
        """
        if rep not in self._manifest["representations"]:
            raise StoreError(f"representation {rep!r} is not in corpus store {self.path}; "
                             f"it holds {sorted(self._manifest['representations'])}")
        start, stop = int(start), int(stop)
        self._check_range(start, stop)
        parts = []
        for s in self._done():
            a, b = max(start, s["start"]), min(stop, s["stop"])
            if a >= b:
                continue
            batch = self._shard_batch(rep, s["index"])
            if a == s["start"] and b == s["stop"]:
                parts.append(batch)
            else:
                parts.append(batch.slice(a - s["start"], b - s["start"]))
        if not parts:
            kind = self._manifest["representations"][rep]
            return Batch.from_arrays(kind, {"offsets": np.zeros(1, np.int64),
                                            **{c: np.zeros(0) for c in KIND_COLUMNS[kind]}})
        return parts[0] if len(parts) == 1 else Batch.concat(parts)

    def sizes(self, rep: str) -> np.ndarray:
        """Nodes (tokens, bag entries) per stored example of ``rep``, shape (n,); reads only offsets."""
        if rep not in self._manifest["representations"]:
            raise StoreError(f"representation {rep!r} is not in corpus store {self.path}; "
                             f"it holds {sorted(self._manifest['representations'])}")
        parts = [np.diff(self._g["reps"][rep][str(s["index"])]["offsets"][:]) for s in self._done()]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def documents(self, start: int = 0, stop: int | None = None) -> list:
        """Examples ``start:stop`` decoded back to :class:`Document` values."""
        stop = self.n if stop is None else stop
        self._check_range(start, stop)
        ids = self._strings("ids", start, stop)
        labels = [decode_label(s, self.labels_encoding) for s in self._strings("labels", start, stop)]
        texts = [json.loads(s) for s in self._strings("texts", start, stop)]
        sources = [json.loads(s) for s in self._strings("sources", start, stop)]
        structs = {rep: decode(self.load(rep, start, stop), self.vocabs)
                   for rep in self._manifest["representations"]}
        fields = bool(self.fields)
        targets = self._g["targets"][start:stop] if self._manifest.get("targets") and stop > start else None
        groups = self._strings("groups", start, stop) if self._manifest.get("groups") else None
        return [Document(id=ids[i], label=labels[i], text=None if fields else texts[i],
                         structures={rep: structs[rep][i] for rep in structs}, source=sources[i],
                         fields=texts[i] if fields else None,
                         target=None if targets is None else float(targets[i]),
                         group=None if groups is None else groups[i])
                for i in range(stop - start)]

    # ---- writing -------------------------------------------------------------------------

    def _need_writable(self):
        if not self.writable:
            raise StoreError(f"corpus store {self.path} is open read-only; open it with mode='r+' to write")
        if self.complete:
            raise StoreError(f"corpus store {self.path} is complete; it cannot be extended. "
                             "Fix: prepare into a new store")

    def _save_manifest(self):
        self._g.attrs["manifest"] = self._manifest
        self._unsaved = False

    def update_manifest(self, **fields):
        """Set top-level manifest fields (e.g. ``parser``, ``runs``) and save."""
        if not self.writable:
            raise StoreError(f"corpus store {self.path} is open read-only")
        self._manifest.update(json.loads(json.dumps(fields)))
        self._save_manifest()

    def begin_run(self, info: dict) -> int:
        """Append a run record to the manifest; return its 1-based number."""
        self._need_writable()
        runs = self._manifest["runs"]
        run = len(runs) + 1
        runs.append({"run": run, "started": now(), "pid": os.getpid(), "parsed_shards": [],
                     "reused_shards": 0, **info})
        self._save_manifest()
        return run

    def _run_record(self, run):
        return self._manifest["runs"][run - 1] if run else None

    def write_shard(self, index: int, docs, run: int | None = None, parsed: bool = False):
        """Encode and write shard ``index`` (the next one in order); then mark it done.

        Parameters
        ----------
        index : int
            Must equal the number of done shards (shards are written in order).
        docs : list of Document
            At most ``shard_size`` examples, every one holding the same structure names
            (only the last shard may be smaller).
        run : int, optional
            Run number from :meth:`begin_run`, recorded with the shard.
        parsed : bool
            Whether this run parsed the shard's documents (recorded in the run log).
        """
        self._need_writable()
        docs = list(docs)
        done = self._done()
        if index != len(done):
            raise StoreError(f"shard {index} written out of order: {len(done)} shard(s) are done, "
                             f"so the next shard is {len(done)}")
        S = self._manifest["shard_size"]
        if not docs or len(docs) > S:
            raise StoreError(f"shard {index} has {len(docs)} examples; a shard holds 1..{S}")
        if done and done[-1]["stop"] - done[-1]["start"] < S:
            raise StoreError(f"shard {index - 1} is a short (last) shard, so no shard can follow it. "
                             "Fix: the input changed since the store was written; prepare into a new store")
        start = done[-1]["stop"] if done else 0
        stop = start + len(docs)
        reps = self._manifest["representations"] or self._representations_of(docs[0])
        carries = self._carries(docs[0], reps) if not done else self._carried()
        cols = self._columns(docs, reps, self.labels_encoding, carries)
        vocabs = self.vocabs
        before = vocabs.sizes()
        try:
            batches = {rep: self._encode(rep, kind, [d.structures[rep] for d in docs], docs, vocabs)
                       for rep, kind in reps.items()}
        except Exception:
            vocabs.truncate(before)  # a failed shard must not leave strings behind
            raise
        entry = {"index": index, "start": start, "stop": stop, "done": False, "vocab_sizes": None, "run": run}
        shards = self._manifest["shards"]
        fresh = len(shards) == index  # no entry yet, so nothing of this shard was ever written
        del shards[index:]  # a stale not-done entry of a killed run
        shards.append(entry)
        self._save_manifest()
        cache = self._writer
        groups = [f"reps/{rep}/{index}" for rep in batches]
        if not done:  # the first shard makes the arrays of what its examples carry (a killed run's are replaced)
            for name in _OPTIONAL_ARRAYS:
                if carries[name]:
                    self._g.create_array(name, shape=(0,), dtype=_OPTIONAL_ARRAYS[name], chunks=(S,),
                                         compressors=_COMPRESSORS, overwrite=True)
        try:
            if cache is not None:
                # at a URL: what the shard's groups hold now (nothing for a fresh shard, else one
                # listing each, concurrently), then every object of the shard sent together when
                # the block ends, before the done flag
                cache.assume_empty(groups) if fresh else cache.learn(groups)
            with cache.batch() if cache is not None else nullcontext():
                self._write_arrays(index, batches, cols, vocabs, before, start, stop)
        except BaseException:
            vocabs.truncate(before)
            raise
        finally:
            if cache is not None:
                cache.unlearn(groups)
        after = vocabs.sizes()
        entry.update(done=True, vocab_sizes=after)
        if not self._manifest["representations"]:
            self._manifest["representations"] = dict(reps)
            for name, value in carries.items():
                if value:
                    self._manifest[name] = value
        rec = self._run_record(run)
        if rec is not None and parsed:
            rec["parsed_shards"].append(index)
        if cache is None:
            self._save_manifest()
        else:  # sent with the next manifest write, after this shard's objects (module docstring)
            self._unsaved = True

    def _write_arrays(self, index, batches, cols, vocabs, before, start, stop):
        """Shard ``index``'s arrays, its text columns and the vocabulary strings it added."""
        rg = self._g["reps"]
        for rep, batch in batches.items():
            sg = rg.require_group(rep).require_group(str(index))
            for name, arr in batch.arrays().items():
                sg.create_array(name, data=np.ascontiguousarray(arr), chunks=(max(1, len(arr)),),
                                compressors=_COMPRESSORS, overwrite=True)
        ahead = self._writer is not None  # at a URL the arrays grow ahead (module docstring)
        expected = (self._manifest.get("expected_shards") or 0) * self._manifest["shard_size"]
        for name, values in cols.items():
            a = self._g[name]
            if not ahead or stop - start < a.chunks[0]:  # a short shard is the last: its chunk written whole
                a.resize((stop,))
            elif a.shape[0] < stop:
                a.resize((_grown(a.shape[0], stop, a.chunks[0], expected),))
            a[start:stop] = np.array(values, dtype=np.float64 if name == "targets" else object)
        after = vocabs.sizes()
        for name in Vocabularies.NAMES:
            if after[name] == before[name]:
                continue  # no new strings: nothing to write (a longer array left by a killed run is cut on reading)
            a = self._g["vocab"][name]
            if not ahead:
                a.resize((after[name],))
            elif a.shape[0] < after[name]:
                a.resize((_grown(a.shape[0], after[name], a.chunks[0]),))
            a[before[name]:after[name]] = np.array(vocabs[name].strings[before[name]:], dtype=object)

    def _cut_to_length(self):
        """The text and vocabulary arrays cut to what the done shards hold (they grow ahead at a URL)."""
        n = self.n
        sizes = self._done()[-1]["vocab_sizes"] if self._done() else {}
        for a, length in [(self._g[name], n) for name in _TEXT_ARRAYS + self._optional()] + \
                [(self._g["vocab"][name], int(sizes.get(name, 0))) for name in Vocabularies.NAMES]:
            if a.shape[0] != length:
                a.resize((length,))

    def note_reused(self, run: int, count: int):
        """Record in the run log how many done shards this run found and did not redo."""
        rec = self._run_record(run)
        if rec is not None:
            rec["reused_shards"] = count
            self._save_manifest()

    @staticmethod
    def _representations_of(doc) -> dict:
        if not doc.structures:
            path, line = _split_source(doc.source)
            raise CorpusFormatError(f"document {doc.id!r} has no structures to store", path=path, line=line,
                                    fix="text formats must be parsed first (gramtile prepare does it)")
        reps = {}
        for name, s in doc.structures.items():
            try:
                reps[name] = kind_of(s)
            except TypeError as e:
                path, line = _split_source(doc.source)
                raise CorpusFormatError(f"structure {name!r} of document {doc.id!r}: {e}", path=path, line=line,
                                        fix="store only trees, dependency trees, sequences, positional trees, "
                                            "WSD instances or bags") from None
        return reps

    @staticmethod
    def _carries(doc, reps) -> dict:
        """What the examples of a new store carry besides texts, from its first example: its
        field names (or None; checked, and every representation key ``reps`` must name one of
        them), whether it has a target, whether it has a group."""
        if doc.fields is not None:
            path, line = _split_source(doc.source)
            try:
                names = check_field_names(doc.fields, f"document {doc.id!r}: fields")
            except CorpusFormatError as e:
                raise CorpusFormatError(e.reason, path=path, line=line, fix=e.fix) from None
            stray = [key for key in reps if split_key(key, names)[0] is None]
            if stray:
                raise CorpusFormatError(
                    f"document {doc.id!r} has the fields {names}, but its structures {stray} name none of them",
                    path=path, line=line, fix="key each field's structures <field>.<representation>, e.g. "
                                              f"{names[0]}.tree")
        return {"fields": None if doc.fields is None else list(doc.fields),
                "targets": doc.target is not None, "groups": doc.group is not None}

    def _carried(self) -> dict:
        m = self._manifest
        return {"fields": m.get("fields"), "targets": bool(m.get("targets")), "groups": bool(m.get("groups"))}

    @staticmethod
    def _columns(docs, reps, labels_encoding: str, carries=None) -> dict:
        want = sorted(reps)
        carries = carries or {"fields": None, "targets": False, "groups": False}
        for d in docs:
            problem = CorpusStore._carry_problem(d, carries)
            if problem:
                path, line = _split_source(d.source)
                raise CorpusFormatError(f"document {d.id!r} {problem[0]}", path=path, line=line, fix=problem[1])
            if sorted(d.structures) != want:
                path, line = _split_source(d.source)
                raise CorpusFormatError(
                    f"document {d.id!r} has structures {sorted(d.structures)}, but this corpus stores {want}",
                    path=path, line=line, fix="give every record the same representations")
            if not isinstance(d.id, str):
                raise CorpusFormatError(f"document id {d.id!r} is not a string", fix="use string ids")
        cols = {"ids": [d.id for d in docs],
                "labels": [encode_label(d.label, labels_encoding) for d in docs],
                "texts": [json.dumps(d.text if d.fields is None else d.fields, ensure_ascii=False) for d in docs],
                "sources": [json.dumps(d.source, ensure_ascii=False) for d in docs]}
        if carries["targets"]:
            cols["targets"] = [float(d.target) for d in docs]
        if carries["groups"]:
            cols["groups"] = [d.group for d in docs]
        return cols

    @staticmethod
    def _carry_problem(d, carries):
        """``(what is wrong, fix)`` when document ``d`` does not carry what the store's examples carry."""
        fields = None if d.fields is None else list(d.fields)
        if fields != carries["fields"]:
            if carries["fields"] is None:
                return f"has fields {fields}, but this corpus stores single texts", "read every record as one text"
            return (f"has fields {fields}, but this corpus stores examples of the fields {carries['fields']}",
                    "give every record the same fields, in the same order")
        if carries["fields"] is not None and d.text is not None:
            return "has both a text and fields", "give the record its texts as fields only"
        if (d.target is not None) != carries["targets"]:
            return (("has a target, but this corpus stores none" if d.target is not None else
                     "has no target, but this corpus stores one per example"), "give every record a target, or none")
        if d.target is not None:
            if isinstance(d.target, bool) or not isinstance(d.target, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(float(d.target)):
                return f"has the target {d.target!r}, not a finite number", "give every record a real-valued target"
        if (d.group is not None) != carries["groups"]:
            return (("has a group, but this corpus stores none" if d.group is not None else
                     "has no group, but this corpus stores one per example"), "give every record a group, or none")
        if d.group is not None and (not isinstance(d.group, str) or not d.group):
            return f"has the group {d.group!r}, not a non-empty string", "give every record a group id (a string)"
        return None

    @staticmethod
    def _encode(rep, kind, structs, docs, vocabs) -> Batch:
        for s, d in zip(structs, docs):
            try:
                k = kind_of(s)
            except TypeError:
                k = type(s).__name__
            if k != kind:
                path, line = _split_source(d.source)
                raise CorpusFormatError(f"structure {rep!r} of document {d.id!r} is a {k}, but this "
                                        f"corpus stores {rep!r} as {kind}", path=path, line=line,
                                        fix=f"give every record a {kind} under {rep!r}")
        try:
            return encode(structs, vocabs, kind=kind)
        except RepresentationError as e:
            raise CorpusFormatError(f"representation {rep!r}: {e}", path=_split_source(docs[0].source)[0],
                                    fix="correct the structure") from None

    def finish(self, skipped=()):
        """Mark the store complete: record ``n_examples``, skipped records and the content hash."""
        self._need_writable()
        shards = self._manifest["shards"]
        if not shards or not all(s["done"] for s in shards):
            raise StoreError(f"corpus store {self.path} cannot be completed: not every shard is done")
        self._manifest["skipped"] = list(skipped)
        self._manifest["n_examples"] = self.n
        if self._writer is not None:
            self._cut_to_length()
            self._writer.drain()  # every shard has landed before the store can be called complete
        self._manifest["content_hash"] = self.compute_content_hash()
        self._manifest["complete"] = True
        self._manifest["completed"] = now()
        self._save_manifest()

    def compute_content_hash(self) -> str:
        """sha256 over the stored content, read back from disk (see module docstring)."""
        parts = {"format_version": FORMAT_VERSION}
        n = self.n
        enc = self.labels_encoding
        for name in ("ids", "labels", "texts"):
            h = hashlib.sha256()
            for s in self._strings(name, 0, n):
                if name == "labels" and enc != "json":
                    # hashed as the JSON of each label, as stores of the "json" encoding hold them: the
                    # same corpus hashes equal whichever encoding stored it
                    s = json.dumps(decode_label(s, enc), ensure_ascii=False)
                b = s.encode("utf-8")
                h.update(len(b).to_bytes(8, "little"))
                h.update(b)
            parts[name] = h.hexdigest()
        if self.fields:
            parts["fields"] = list(self.fields)
        if self._manifest.get("groups"):
            h = hashlib.sha256()
            for s in self._strings("groups", 0, n):
                b = s.encode("utf-8")
                h.update(len(b).to_bytes(8, "little"))
                h.update(b)
            parts["groups"] = h.hexdigest()
        if self._manifest.get("targets"):
            parts["targets"] = hashlib.sha256(self.targets.astype("<f8").tobytes()).hexdigest()
        for name, strings in self.vocabs.to_dict().items():
            parts[f"vocab/{name}"] = hashlib.sha256(json.dumps(strings, ensure_ascii=False).encode()).hexdigest()
        for rep, kind in sorted(self._manifest["representations"].items()):
            hs = {c: hashlib.sha256() for c in ("sizes",) + KIND_COLUMNS[kind]}

            def read(index, rep=rep, kind=kind):
                g = self._g["reps"][rep][str(index)]
                return [g[c][:] for c in ("offsets",) + KIND_COLUMNS[kind]]

            for offsets, *cols in _ahead(read, [s["index"] for s in self._done()]):
                hs["sizes"].update(np.diff(offsets).astype("<i8").tobytes())
                for c, a in zip(KIND_COLUMNS[kind], cols):
                    hs[c].update(a.astype(a.dtype.newbyteorder("<")).tobytes())
            parts[f"reps/{rep}"] = {"kind": kind, **{c: h.hexdigest() for c, h in hs.items()}}
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def verify(self) -> bool:
        """Recompute the content hash of a complete store and compare it with the recorded one."""
        if not self.complete:
            raise StoreError(f"corpus store {self.path} is incomplete; rerun `gramtile prepare` to finish it")
        return self.compute_content_hash() == self.content_hash
