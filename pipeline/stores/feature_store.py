"""The storage of explicit features: feature sets inside a corpus store, and feature stores.

A kernel with a finite feature map (``gramtile.kernels.maps``) gives every example a sparse row
``phi(x)`` over corpus-level feature ids, and ``K(x, y) = sum_f w_f phi_f(x) phi_f(y)``. For a
corpus store the rows, the feature vocabulary and the feature frequencies are built once, by
the Gram engine's driver (under the corpus store's writer lock, before any tile is submitted,
like corpus resources), and afterwards only loaded, so tiles computed on different workers
share feature ids::

    CORPUS.zarr/features/<kind>-<param hash>/
        zarr.json                 attribute "gramtile_features": kind, params, n_examples,
                                  n_features, shard sha256s, corpus content hash, content_hash
        key_ptr, key_items        the feature vocabulary: feature f's key (FeatureVocab), in id order
        order                     weight exponent of each feature (w_f = base ** order_f)
        df                        number of examples holding each feature (its frequency)
        phi/<k>/indptr, indices, data    shard k's rows (CSR, ids increasing within a row)

The **param hash** covers what fixes features and values (``FeatureMap.params``: for ST the
representation and ``leaves``, not ``lam``, which only changes the weights). The attribute is
written last; a group without it is an unfinished build and is rebuilt. Loading a shard checks
its sha256. The corpus content hash does not cover ``features/``.

The feature sets are built and loaded by :mod:`gramtile.pipeline.compute.feature_sets`, which
runs the kernels' feature maps and writes through the helpers here.

A *feature store* (``gramtile features --out F.zarr``, :func:`~gramtile.pipeline.compute.feature_sets.write_store`) is a separate group
holding the learner's rows ``phi(x) sqrt(w)`` (normalised for a normalised kernel), labels and
ids, and copies of the feature vocabulary and the corpus's string vocabularies;
:class:`FeatureStore` reads its rows shard by shard (docs/formats.md, "Feature store").
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from gramtile.pipeline.stores.corpus_store import corpus_group
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError
from gramtile.pipeline.stores.integrity import attr_intact, sealed
from gramtile.pipeline.stores.storage import location

ATTR = "gramtile_features"


GROUP = "features"


FORMAT_VERSION = 1


COMPRESSORS = (ZstdCodec(level=3), Crc32cCodec())


STORE_ATTR = "gramtile_feature_store"


def feature_group(kind: str, params: dict) -> str:
    """``features/<kind>-<param hash>``: the group of a corpus store holding the feature set of a kernel
    of ``kind`` whose feature map has ``params`` (what fixes its features and values)."""
    digest = hashlib.sha256(json.dumps({"format": FORMAT_VERSION, "kind": kind, **params}, sort_keys=True).encode()).hexdigest()[:16]
    return f"{GROUP}/{kind}-{digest}"




def set_info(corpus_path, name: str) -> dict | None:
    """The stored attribute of the feature set in group ``name`` of a corpus store (None when absent
    or unfinished)."""
    g = corpus_group(corpus_path)
    try:
        node = g[name]
    except KeyError:
        return None
    meta = node.attrs.get(ATTR)
    return dict(meta) if meta and meta.get("content_hash") else None


def read_csr(group, s: dict, n_features: int, unreadable: str, mismatch: str, fix: str) -> sp.csr_matrix:
    """The CSR rows of one stored shard group (``group()`` opens it: ``indptr``, ``indices``,
    ``data``), checked against the shard record ``s`` (``sha256``, ``start``, ``stop``); the
    messages name the shard."""
    try:
        sg = group()
        indptr, indices, data = sg["indptr"][...], sg["indices"][...], sg["data"][...]
    except Exception as e:  # noqa: BLE001  (a failed crc32c check surfaces as a codec error, a damaged
        # zarr.json of the group or an array as a TypeError or KeyError)
        raise StoreCorruptError(f"{unreadable} ({e}). {fix}") from None
    if content_sha256(indptr, indices, data) != s["sha256"]:
        raise StoreCorruptError(f"{mismatch}. {fix}")
    return sp.csr_matrix((data, indices, indptr), shape=(s["stop"] - s["start"], n_features))


def content_sha256(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def write_array(g, name, a):
    g.create_array(name, data=a, chunks=(max(1, a.shape[0]),), compressors=COMPRESSORS, overwrite=True)


def strings_sha256(values) -> str:
    """sha256 of a list of strings as stored in a feature store: their lengths (int64 little endian),
    then the strings concatenated in UTF-8 (about 0.2 s per million short strings, a tenth of
    reading them from the store)."""
    values = [str(x) for x in values]
    h = hashlib.sha256(np.fromiter(map(len, values), "<i8", len(values)).tobytes())
    h.update("".join(values).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def write_strings(g, name, values) -> str:
    """Write a string array; returns :func:`strings_sha256` of its values."""
    g.create_array(name, shape=(len(values),), dtype=str, chunks=(max(1, len(values)),), compressors=COMPRESSORS)
    if len(values):
        g[name][:] = np.asarray([str(x) for x in values], dtype=object)
    return strings_sha256(values)


class FeatureStore:
    """A feature store written by :func:`write_store`, read lazily: its attribute, labels and ids
    at open; rows shard by shard on demand (each shard's sha256 checked; the last ``cache``
    shards kept), so a learner can stream rows without holding all of them.

    Attributes: ``path``, ``meta`` (the attribute), ``n``, ``n_features``, ``nnz``, ``uid``,
    ``labels``, ``ids``, ``starts`` (first row of each shard).
    """

    def __init__(self, path, cache: int = 8):
        loc = location(path)
        if not loc.exists("zarr.json"):
            raise StoreError(f"no feature store at {path}. Fix: write one with `gramtile features --corpus C "
                             f"--kernel SPEC --out {path}`")
        self.path = str(path)
        meta = _store_attr(loc, path)
        self._g = zarr.open_group(loc.zarr_store(), mode="r")
        self.meta = meta
        self.n = int(meta["n_examples"])
        self.n_features = int(meta["n_features"])
        self.nnz = int(meta["nnz"])
        self.uid = str(meta.get("uid", meta["corpus_content_hash"]))  # as current_uid reads it
        # checked once per open, as read (a lost chunk reads as Zarr's fill value: caught here)
        self.labels = self._checked_strings("labels")
        self.ids = self._checked_strings("ids")
        if len(self.labels) != self.n or len(self.ids) != self.n:
            raise StoreCorruptError(f"feature store {self.path} holds {len(self.labels)} labels and {len(self.ids)} "
                                    f"ids for {self.n} rows. Fix: {REWRITE_FIX}")
        self.starts = np.asarray([s["start"] for s in meta["shards"]], np.int64)
        self._cache_size = max(1, int(cache))
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    @property
    def n_shards(self) -> int:
        return len(self.meta["shards"])

    def shard(self, k: int) -> sp.csr_matrix:
        """Rows of shard ``k`` (CSR, shape (its rows, n_features))."""
        with self._lock:
            hit = self._cache.get(k)
            if hit is not None:
                self._cache.move_to_end(k)
                return hit
        s = self.meta["shards"][k]
        m = read_csr(lambda: self._g["rows"][str(s["index"])], s, self.n_features,
                      f"rows of shard {k} of feature store {self.path} cannot be read",
                      f"rows of shard {s['index']} of feature store {self.path} do not match their sha256",
                      "Fix: write the store again")
        with self._lock:
            self._cache[k] = m
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return m

    def rows(self, idx) -> sp.csr_matrix:
        """Rows ``idx`` (any order, repeats allowed), shape (len(idx), n_features)."""
        idx = np.asarray(idx, np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise StoreError(f"row index outside 0..{self.n - 1} of feature store {self.path}")
        if idx.size == 0:
            return sp.csr_matrix((0, self.n_features))
        sh = np.searchsorted(self.starts, idx, side="right") - 1
        order = np.argsort(sh, kind="stable")
        parts = []
        for k in np.unique(sh).tolist():
            sel = order[sh[order] == k]
            parts.append(self.shard(int(k))[idx[sel] - self.starts[k]])
        whole = parts[0] if len(parts) == 1 else sp.vstack(parts, format="csr")
        inv = np.empty_like(order)
        inv[order] = np.arange(order.shape[0])
        if not np.array_equal(order, np.arange(order.shape[0])):
            whole = whole[inv]
        return sp.csr_matrix(whole)

    def all_rows(self) -> sp.csr_matrix:
        parts = [self.shard(k) for k in range(self.n_shards)]
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, self.n_features))

    def _checked_strings(self, name: str) -> list:
        """The string array ``name`` (``labels``, ``ids``, ``strings/sym``, ...), checked against
        the sha256 the attribute records for it."""
        where = f"{self.path}/{name}"
        try:
            got = [str(x) for x in self._g[name][...]]
        except Exception as e:  # noqa: BLE001  (a missing array, a failed crc32c, a damaged zarr.json)
            raise StoreCorruptError(f"{where} of feature store {self.path} cannot be read ({type(e).__name__}: {e}). "
                                    f"Fix: {REWRITE_FIX}") from None
        if strings_sha256(got) != self.meta["strings_sha256"].get(name):
            raise StoreCorruptError(f"{where} does not match the sha256 feature store {self.path} records for it "
                                    f"(damaged or replaced). Fix: {REWRITE_FIX}")
        return got

    def vocab_arrays(self) -> dict:
        """``key_ptr``, ``key_items``, ``order`` of the feature vocabulary (column f's key), checked
        against the recorded ``vocab_sha256``."""
        try:
            vg = self._g["vocab"]
            got = {name: vg[name][...] for name in ("key_ptr", "key_items", "order")}
        except Exception as e:  # noqa: BLE001
            raise StoreCorruptError(f"the vocabulary {self.path}/vocab of feature store {self.path} cannot be read "
                                    f"({type(e).__name__}: {e}). Fix: {REWRITE_FIX}") from None
        if content_sha256(*(got[k] for k in sorted(got))) != self.meta.get("vocab_sha256"):
            raise StoreCorruptError(f"the vocabulary {self.path}/vocab does not match the vocab_sha256 feature store "
                                    f"{self.path} records (damaged or replaced). Fix: {REWRITE_FIX}")
        return got

    def strings(self) -> dict:
        """The corpus's string vocabularies (``sym``, ``prod``, ``pprod``) the keys refer to, each
        checked against its recorded sha256."""
        names = sorted(k.split("/", 1)[1] for k in self.meta["strings_sha256"] if k.startswith("strings/"))
        return {name: self._checked_strings(f"strings/{name}") for name in names}


#: the fix named when a feature store's content does not match its checksums
REWRITE_FIX = "write the store again (delete it and rerun `gramtile features`)"


def _store_attr(loc, path, legacy: bool = False) -> dict:
    """The checked attribute of the feature store at ``loc``; ``legacy`` accepts one written
    before its arrays had checksums (for :func:`verify_store`)."""
    try:
        meta = zarr.open_group(loc.zarr_store(), mode="r").attrs.get(STORE_ATTR)
    except Exception as e:  # noqa: BLE001  (a damaged zarr.json)
        raise StoreCorruptError(f"{path}/zarr.json of feature store {path} cannot be read ({type(e).__name__}: "
                                f"{e}). Fix: {REWRITE_FIX}") from None
    if not meta:
        raise StoreCorruptError(f"{path} is not a gramtile feature store (no {STORE_ATTR!r} attribute)")
    meta = dict(meta)
    intact = attr_intact(meta)
    if intact is False or (intact is None and "strings_sha256" in meta):
        raise StoreCorruptError(f"the attribute of feature store {path} ({path}/zarr.json) does not match its "
                                f"recorded sha256 (edited or damaged). Fix: {REWRITE_FIX}")
    if intact is None and not legacy:
        raise StoreCorruptError(f"feature store {path} was written before its labels, ids and string tables had "
                                f"checksums. Fix: run `gramtile verify --repair {path}` (checks the rows and the "
                                f"vocabulary, records the rest as it is now), or write the store again")
    return meta


def current_uid(path) -> str:
    """The uid of the feature store at ``path`` as it is on disk now (reads only its attribute)."""
    loc = location(path)
    if not loc.exists("zarr.json"):
        raise StoreError(f"no feature store at {path}. Fix: write one with `gramtile features --corpus C --kernel "
                         f"SPEC --out {path}`")
    meta = _store_attr(loc, path)
    return str(meta.get("uid", meta["corpus_content_hash"]))


def is_feature_store(path) -> bool:
    """True when ``path`` is a local folder whose group attribute names a feature store."""
    p = Path(str(path))
    try:
        return STORE_ATTR in json.loads((p / "zarr.json").read_text(encoding="utf-8")).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return False


def verify_store(path, repair: bool = False) -> str:
    """Check every array of a feature store against its checksum; returns a one-line report.

    With ``repair``, a store written before its labels, ids and string tables had checksums gets
    them (its rows and vocabulary are checked against the hashes it always recorded first; the
    rest is recorded as it is now).

    Raises
    ------
    StoreCorruptError
        What does not match, naming it and the fix.
    """
    loc = location(path)
    meta = _store_attr(loc, path, legacy=repair)
    if attr_intact(meta) is None:  # legacy, repair asked
        g = zarr.open_group(loc.zarr_store(), mode="r+")
        hashes = {}
        for name in ("labels", "ids", *(f"strings/{k}" for k in sorted(g["strings"].array_keys()))):
            try:
                hashes[name] = strings_sha256([str(x) for x in g[name][...]])
            except Exception as e:  # noqa: BLE001
                raise StoreCorruptError(f"{path}/{name} of feature store {path} cannot be read "
                                        f"({type(e).__name__}: {e}). Fix: {REWRITE_FIX}") from None
        meta = sealed({**meta, "strings_sha256": hashes})
        fs = _unsealed_check(path, meta)
        g.attrs[STORE_ATTR] = meta
        return (f"{path}: recorded the checksums of its labels, ids and {len(hashes) - 2} string table(s); "
                f"{fs.n_shards} row shard(s) and the vocabulary match the hashes it recorded")
    fs = _unsealed_check(path, meta)
    return f"{path}: feature store intact ({fs.n_shards} row shard(s), labels, ids, vocabulary, string tables)"


def _unsealed_check(path, meta) -> FeatureStore:
    fs = FeatureStore.__new__(FeatureStore)
    fs.path, fs.meta = str(path), meta
    fs._g = zarr.open_group(location(path).zarr_store(), mode="r")
    fs.n, fs.n_features = int(meta["n_examples"]), int(meta["n_features"])
    fs._cache_size, fs._cache, fs._lock = 1, OrderedDict(), threading.Lock()
    fs.starts = np.asarray([s["start"] for s in meta["shards"]], np.int64)
    fs.labels, fs.ids = fs._checked_strings("labels"), fs._checked_strings("ids")
    fs.vocab_arrays()
    fs.strings()
    for k in range(fs.n_shards):
        fs.shard(k)
    return fs


def open_store(path) -> tuple:
    """``(rows csr, labels, attribute)`` of a feature store written by :func:`write_store`
    (every row in memory; :class:`FeatureStore` reads them on demand)."""
    fs = FeatureStore(path)
    return fs.all_rows(), fs.labels, dict(fs.meta)
