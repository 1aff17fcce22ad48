"""Explicit feature sets of a corpus, stored in its corpus store; the corpus-level feature vocabulary.

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

A *feature store* (``gramtile features --out F.zarr``, :func:`write_store`) is a separate group
holding the learner's rows ``phi(x) sqrt(w)`` (normalised for a normalised kernel), labels and
ids, and copies of the feature vocabulary and the corpus's string vocabularies;
:class:`FeatureStore` reads its rows shard by shard (docs/formats.md, "Feature store").
"""
from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.maps import LocalFeatures, feature_map, no_map_reason, weights
from gramtile.kernels.maps.subsequence import occurrences
from gramtile.pipeline.cache import current
from gramtile.pipeline.memory import available_memory_mb
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import FeatureSetTooLargeError, StoreCorruptError, StoreError
from gramtile.pipeline.stores.integrity import attr_intact, clean_stale, publish_dir, sealed, temp_sibling
from gramtile.pipeline.stores.resource_store import corpus_lock
from gramtile.pipeline.stores.storage import disk_summary, is_url, location

ATTR = "gramtile_features"
GROUP = "features"
FORMAT_VERSION = 1
LOCK_WAIT_SECONDS = 600.0
_COMPRESSORS = (ZstdCodec(level=3), Crc32cCodec())

#: Resident bytes the vocabulary takes per distinct feature (a dictionary entry and the key arrays;
#: ``bench/feature_vocab.py``: 228 B at 8.9 M subsequence features, more at fewer).
VOCAB_BYTES = 230
#: Distinct features per enumerated occurrence assumed when judging whether a subsequence map's
#: vocabulary fits: about a third of what real sentences give (0.44-0.52 at n = 2, 0.64-0.71 at
#: n = 3; BENCHMARKS.md, "subsequence at 50,068 sentences"), so a refused build would not fit.
MIN_DISTINCT = 0.25



class FeatureVocab:
    """Corpus-level feature ids: a feature's key (its items, with references translated to
    corpus ids) -> id, assigned in first-seen order and append-only, like a vocabulary.

    Keys of one length are looked up together: their int64 items, viewed as one fixed-width byte
    string each, are the dictionary keys (one dictionary per key length, so the byte strings
    NumPy returns without their trailing zero bytes stay distinct)."""

    def __init__(self, key_ptr=None, key_items=None, order=None):
        self.index: dict = {}
        self.size = 0
        self._ptr = [np.zeros(1, np.int64)]
        self._items: list = []
        self._order: list = []
        if key_ptr is not None:
            key_ptr = np.asarray(key_ptr, np.int64)
            items = np.asarray(key_items, np.int64)
            feats = np.arange(key_ptr.shape[0] - 1)
            for L, sel, keys in self._keys(items, key_ptr, feats):
                self.index.setdefault(L, {}).update(zip(keys, sel.tolist()))
            self.size = int(feats.shape[0])
            self._ptr = [key_ptr]
            self._items = [items]
            self._order = [np.asarray(order, np.int64)]

    def __len__(self):
        return self.size

    @staticmethod
    def _keys(items, key_ptr, feats):
        """Per key length L: (L, positions in ``feats``, the keys as byte strings)."""
        lens = key_ptr[feats + 1] - key_ptr[feats]
        for L in np.unique(lens).tolist():
            sel = np.flatnonzero(lens == L)
            f = feats[sel]
            mat = np.ascontiguousarray(items[key_ptr[f][:, None] + np.arange(max(L, 1))]) if L else \
                np.zeros((f.shape[0], 1), np.int64)
            yield L, sel, mat.view(f"S{8 * mat.shape[1]}").ravel().tolist()

    def _lookup(self, items, key_ptr, feats, bad, grow):
        """Ids of keys ``feats`` (new ones appended when ``grow`` and not ``bad``; else -1)."""
        out = np.full(feats.shape[0], -1, np.int64)
        new = []
        for L, sel, keys in self._keys(items, key_ptr, feats):
            d = self.index.setdefault(L, {})
            got = np.fromiter((d.get(k, -1) for k in keys), np.int64, len(keys))
            if grow:
                for q in np.flatnonzero((got < 0) & ~bad[sel]).tolist():
                    g = d.get(keys[q])
                    if g is None:
                        g = d[keys[q]] = self.size
                        self.size += 1
                        new.append((g, sel[q]))
                    got[q] = g
            out[sel] = got
        new.sort()
        return out, [q for _, q in new]

    def intern(self, lf: LocalFeatures, grow: bool = True) -> np.ndarray:
        """Corpus ids of the local features of ``lf`` (new keys get new ids when ``grow``,
        else -1, as does a feature referencing an unknown one)."""
        gid = np.full(lf.m, -1, np.int64)
        items = lf.key_items.copy()
        item_feat = np.repeat(np.arange(lf.m), np.diff(lf.key_ptr))
        item_level = lf.level[item_feat]
        for lv in np.unique(lf.level).tolist():
            feats = np.flatnonzero(lf.level == lv)
            # translate this level's references (lower levels are done)
            refs = (item_level == lv) & lf.key_ref
            items[refs] = gid[lf.key_items[refs]]
            bad = np.zeros(lf.m, np.bool_)
            bad[item_feat[refs & (items < 0)]] = True
            ids, new = self._lookup(items, lf.key_ptr, feats, bad[feats], grow)
            gid[feats] = ids
            if new:
                nf = feats[np.asarray(new, np.int64)]
                lens = lf.key_ptr[nf + 1] - lf.key_ptr[nf]
                self._ptr.append(self._ptr[-1][-1] + np.cumsum(lens))
                self._items.append(items[_ranges(lf.key_ptr[nf], lens)])
                self._order.append(lf.order[nf].astype(np.int64))
        return gid

    def arrays(self) -> dict:
        z = np.zeros(0, np.int64)
        return {"key_ptr": np.concatenate(self._ptr),
                "key_items": np.concatenate(self._items) if self._items else z,
                "order": np.concatenate(self._order) if self._order else z}

    @property
    def order(self) -> np.ndarray:
        return np.concatenate(self._order) if self._order else np.zeros(0, np.int64)


def _ranges(starts, lens) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` over (starts, lens)."""
    total = int(lens.sum())
    ends = np.cumsum(lens)
    return np.repeat(starts - (ends - lens), lens) + np.arange(total)


def rows_of(lf: LocalFeatures, gid: np.ndarray, n_features: int) -> sp.csr_matrix:
    """The CSR rows (examples x corpus features) of ``lf`` under corpus ids ``gid``
    (features with id -1 are left out)."""
    col = gid[lf.idx]
    keep = col >= 0
    row = np.repeat(np.arange(lf.ptr.shape[0] - 1), np.diff(lf.ptr))
    m = sp.csr_matrix((lf.val[keep], (row[keep], col[keep])), shape=(lf.ptr.shape[0] - 1, n_features))
    m.sort_indices()
    return m


def map_of(base):
    fmap = feature_map(base)
    if fmap is None:
        raise KernelSpecError(f"kernel {base.to_json()} has no explicit feature map: {no_map_reason(base)}")
    return fmap


def group_name(base) -> str:
    """``features/<kind>-<param hash>`` of a base spec with a feature map."""
    fmap = map_of(base)
    params = {"format": FORMAT_VERSION, "kind": base.kind, **fmap.params(base)}
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
    return f"{GROUP}/{base.kind}-{digest}"


def _open(corpus_path, mode="r"):
    loc = location(corpus_path)
    if not loc.exists("zarr.json"):
        raise StoreError(f"no corpus store at {loc}. Fix: create it with `gramtile prepare --out {loc}`")
    return zarr.open_group(loc.zarr_store(), mode=mode)


def info(corpus_path, base) -> dict | None:
    """The stored attribute of the base spec's feature set (None when absent or unfinished)."""
    g = _open(corpus_path)
    try:
        node = g[group_name(base)]
    except KeyError:
        return None
    meta = node.attrs.get(ATTR)
    return dict(meta) if meta and meta.get("content_hash") else None



def _read_csr(group, s: dict, n_features: int, unreadable: str, mismatch: str, fix: str) -> sp.csr_matrix:
    """The CSR rows of one stored shard group (``group()`` opens it: ``indptr``, ``indices``,
    ``data``), checked against the shard record ``s`` (``sha256``, ``start``, ``stop``); the
    messages name the shard."""
    try:
        sg = group()
        indptr, indices, data = sg["indptr"][...], sg["indices"][...], sg["data"][...]
    except Exception as e:  # noqa: BLE001  (a failed crc32c check surfaces as a codec error, a damaged
        # zarr.json of the group or an array as a TypeError or KeyError)
        raise StoreCorruptError(f"{unreadable} ({e}). {fix}") from None
    if _sha(indptr, indices, data) != s["sha256"]:
        raise StoreCorruptError(f"{mismatch}. {fix}")
    return sp.csr_matrix((data, indices, indptr), shape=(s["stop"] - s["start"], n_features))

def _sha(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _write(g, name, a):
    g.create_array(name, data=a, chunks=(max(1, a.shape[0]),), compressors=_COMPRESSORS, overwrite=True)


def too_large(corpus_path, base, cs: CorpusStore, pairwise: bool = False) -> str | None:
    """Why the feature set of ``base`` over ``cs`` could not be built in the memory available now,
    or None. Only the subsequence map's vocabulary can outgrow memory on its own: it enumerates
    sum_p C(L, p) occurrences per sequence, most of them distinct features (the tree, route and
    bag maps have at most one feature per node, route position or token). Checked by the build
    only, so a feature set already stored is used whatever the memory now. ``pairwise``: the caller
    (``gramtile gram``) has a pairwise path to suggest; other commands (``features``, linear
    learning) do not take ``--path``."""
    if base.kind != "subsequence":
        return None
    occ = occurrences(base, cs.sizes(base.rep_name))
    need_mb = occ * MIN_DISTINCT * VOCAB_BYTES / 1e6
    avail_mb = available_memory_mb()
    if need_mb <= avail_mb:
        return None
    return (f"the feature set of {base.to_json()} over corpus store {corpus_path} enumerates {occ:,} "
            f"subsequence occurrences; its vocabulary would take at least {need_mb:,.0f} MB (at "
            f"{MIN_DISTINCT:g} distinct features per occurrence, {VOCAB_BYTES} B each) and {avail_mb:,.0f} MB "
            f"are available. Fix: {'use the pairwise path (--path pairwise, or auto, which keeps it here)' if pairwise else 'compute the kernel pair by pair with `gramtile gram` (no feature set is built) and learn from that Gram store'}, "
            f"a smaller n, or shorter sequences")


def _build(corpus_path, base, cs: CorpusStore, pairwise: bool = False) -> dict:
    t0 = time.perf_counter()
    fmap = map_of(base)
    rep = base.rep_name
    if rep not in cs.representations:
        raise KernelSpecError(f"kernel {base.to_json()} reads representation {rep!r}, which corpus store "
                              f"{corpus_path} does not hold (it holds {sorted(cs.representations)})")
    reason = too_large(corpus_path, base, cs, pairwise)
    if reason:
        raise FeatureSetTooLargeError(reason)
    root = _open(corpus_path, mode="r+")
    g = root.require_group(group_name(base))
    if ATTR in g.attrs:
        del g.attrs[ATTR]
    vocab = FeatureVocab()
    shards, df = [], np.zeros(0, np.int64)
    ranges = [(int(a), int(b)) for a, b in cs.shard_ranges] or [(0, int(cs.n))]
    for k, (a, b) in enumerate(ranges):
        batch = cs.load(rep, a, b)
        lf = fmap.local(base, batch)
        gid = vocab.intern(lf)
        m = rows_of(lf, gid, len(vocab))
        sg = g.require_group("phi").require_group(str(k))
        indptr, indices = m.indptr.astype(np.int64), m.indices.astype(np.int64)
        for name, arr in (("indptr", indptr), ("indices", indices), ("data", m.data)):
            _write(sg, name, arr)
        shards.append({"index": k, "start": a, "stop": b, "sha256": _sha(indptr, indices, m.data)})
        # frequencies summed as they come: one array of the features so far (a per-shard copy
        # of it, kept to the end, took shards x features x 8 bytes: 12 GB at 1,000 x 1.5 M)
        counts = np.bincount(indices, minlength=len(vocab))
        if df.shape[0] < counts.shape[0]:
            df = np.concatenate([df, np.zeros(counts.shape[0] - df.shape[0], np.int64)])
        df += counts
    nf = len(vocab)
    df = np.concatenate([df, np.zeros(nf - df.shape[0], np.int64)]) if df.shape[0] < nf else df
    arrays = {**vocab.arrays(), "df": df}
    for name, arr in arrays.items():
        _write(g, name, arr)
    meta = {"kind": base.kind, "params": fmap.params(base), "format_version": FORMAT_VERSION,
            "n_examples": int(cs.n), "n_features": nf, "nnz": int(df.sum()), "shards": shards,
            "corpus_content_hash": cs.content_hash, "build_seconds": round(time.perf_counter() - t0, 3),
            "content_hash": _sha(*(arrays[k] for k in sorted(arrays)), *(s["sha256"].encode() for s in shards))}
    g.attrs[ATTR] = meta  # last: marks the group finished
    current().count("feature-meta", "built")  # tests check that tile tasks only load
    return meta


class FeatureSetWriteError(StoreError):
    """The corpus store's storage refused the feature set (full, read-only): the message names the
    corpus store and its storage, not the command's --out."""


def ensure(corpus_path, base, wait: float = LOCK_WAIT_SECONDS, pairwise: bool = False) -> dict:
    """The feature set of ``base`` in the corpus store, built (under the store's writer lock,
    from every example) if missing or made from another corpus content; returns its attribute.
    ``pairwise``: a refusal as too large may suggest ``--path pairwise`` (``gramtile gram``)."""
    cs = CorpusStore.open(corpus_path)
    meta = info(corpus_path, base)
    if meta is not None and meta.get("corpus_content_hash") == cs.content_hash:
        return meta
    if not cs.complete:
        raise StoreError(f"corpus store {corpus_path} is incomplete; feature sets are built from the whole corpus. "
                         f"Fix: rerun `gramtile prepare` to finish it first")
    lock = corpus_lock(corpus_path, wait)
    try:
        meta = info(corpus_path, base)  # another driver may have built it while we waited
        if meta is None or meta.get("corpus_content_hash") != cs.content_hash:
            try:
                meta = _build(corpus_path, base, cs, pairwise)
            except OSError as e:  # the corpus store's storage (full, read-only), not the command's --out
                where = f"the storage {disk_summary(corpus_path)}" if not is_url(str(corpus_path)) else "its storage"
                raise FeatureSetWriteError(
                    f"cannot write the feature set {group_name(base)} into the corpus store {corpus_path} "
                    f"({e.strerror or e}; feature sets of a corpus are kept in its store, on {where}). Fix: free "
                    f"space on the storage holding {corpus_path} (or make it writable), then rerun the same "
                    "command") from None
    finally:
        lock.release()
    return meta


class FeatureSet:
    """A loaded feature set: frequencies, orders, and rows read shard by shard (cached)."""

    def __init__(self, corpus_path, base, meta: dict):
        self.corpus_path = corpus_path
        self.base = base
        self.meta = meta
        g = _open(corpus_path)[group_name(base)]
        self._g = g
        self.df = g["df"][...]
        self.order = g["order"][...]
        self.n = int(meta["n_examples"])
        self.n_features = int(meta["n_features"])
        self.w = weights(map_of(base), base, self.order)
        self._starts = np.asarray([s["start"] for s in meta["shards"]], np.int64)
        #: filled by the product path on first use: frequent feature ids, (sum of rare df^2, nnz)
        self.dense_ids = None
        self.df_sums = None

    def _shard(self, k: int) -> sp.csr_matrix:
        s = self.meta["shards"][k]
        key = (location(self.corpus_path).canonical(), self.meta["content_hash"], k)
        where = f"feature shard {k} of {group_name(self.base)} in {self.corpus_path}"
        return current().load("feature-rows", key, lambda: _read_csr(
            lambda: self._g["phi"][str(k)], s, self.n_features, f"{where} cannot be read",
            f"{where} does not match its recorded sha256", "Fix: delete that group; the next `gramtile gram` rebuilds it"))

    def rows(self, idx) -> sp.csr_matrix:
        """Rows of corpus examples ``idx`` (any order), shape (len(idx), n_features)."""
        idx = np.asarray(idx, np.int64)
        sh = np.searchsorted(self._starts, idx, side="right") - 1
        parts, where = [], np.empty(idx.shape[0], np.int64)
        pos = 0
        for k in np.unique(sh):
            m = self._shard(int(k))
            sel = np.flatnonzero(sh == k)
            parts.append(m[idx[sel] - self._starts[k]])
            where[sel] = np.arange(pos, pos + sel.shape[0])
            pos += sel.shape[0]
        whole = parts[0] if len(parts) == 1 else sp.vstack(parts, format="csr")
        if not np.array_equal(where, np.arange(idx.shape[0])):
            whole = whole[where]  # row i of the result is row where[i] of the shard-ordered stack
        return whole


def load(corpus_path, base) -> FeatureSet:
    """The stored feature set of ``base`` (never built here: the driver built it)."""
    meta = info(corpus_path, base)
    if meta is None:
        raise StoreError(f"corpus store {corpus_path} has no feature set {group_name(base)} for kernel "
                         f"{base.to_json()}. Fix: run `gramtile gram` (its driver builds it) or pass --path pairwise")
    key = (location(corpus_path).canonical(), meta["content_hash"])
    return current().load("feature-meta", key, lambda: FeatureSet(corpus_path, base, meta))


# ---- feature stores (gramtile features --out F.zarr) ------------------------------------------

STORE_ATTR = "gramtile_feature_store"


def _base_of(spec) -> tuple:
    """``(base spec, normalize)`` of a base kernel with a map or ``normalized`` of one."""
    base, normalize = spec, False
    if spec.kind == "normalized":
        base, normalize = spec.kernel, True
    if spec.parts() and not normalize or base.parts():
        raise KernelSpecError(f"gramtile features takes a base kernel with a feature map or 'normalized' of one, "
                              f"got {spec.to_json()}")
    return base, normalize


def _scaled(fs: FeatureSet, idx, normalize: bool, scale) -> sp.csr_matrix:
    X = sp.csr_matrix(fs.rows(idx) @ scale)
    if normalize:
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).reshape(-1))
        X = sp.csr_matrix(sp.diags(np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)) @ X)
    X.sort_indices()
    return X


def linear_rows(corpus_path, spec, start: int = 0, stop: int | None = None) -> tuple:
    """Rows whose dot products are the kernel: ``Phi diag(sqrt(w))`` of a base spec with a map,
    divided by their norms for ``normalized`` of one, for examples ``start:stop`` (default all).
    Returns ``(csr rows, base spec)``."""
    base, normalize = _base_of(spec)
    ensure(corpus_path, base)
    fs = load(corpus_path, base)
    stop = fs.n if stop is None else stop
    return _scaled(fs, np.arange(start, stop), normalize, sp.diags(np.sqrt(fs.w))), base


def write_store(corpus_path, spec, out) -> dict:
    """Write the explicit features of every corpus example into a new feature store ``out``
    (a local path): rows chunked by the corpus's shards, with ids and labels, and what maps a new
    example onto the same columns (the feature vocabulary of the corpus's feature set and the
    corpus's string vocabularies: :class:`FeatureStore`). Written beside ``out`` and renamed into
    place, so a failed run leaves nothing behind."""
    out = Path(out)
    if out.exists():
        raise StoreError(f"--out {out} exists. Fix: choose another --out, or delete it (`rm -r {out}`) to write "
                         f"it again")
    cs = CorpusStore.open(corpus_path)
    base, normalize = _base_of(spec)
    ensure(corpus_path, base)
    fs = load(corpus_path, base)
    scale = sp.diags(np.sqrt(fs.w))
    clean_stale(out)  # temporary folders of runs killed before their rename
    tmp = temp_sibling(out)
    try:
        g = zarr.open_group(str(tmp), mode="w")
        shards, nnz = [], 0
        ranges = [(int(a), int(b)) for a, b in cs.shard_ranges] or [(0, int(cs.n))]
        for k, (a, b) in enumerate(ranges):  # shard by shard: one shard's rows in memory at a time
            m = _scaled(fs, np.arange(a, b), normalize, scale)
            nnz += int(m.nnz)
            sg = g.require_group("rows").require_group(str(k))
            for name, arr in (("indptr", m.indptr.astype(np.int64)), ("indices", m.indices.astype(np.int64)),
                              ("data", m.data)):
                _write(sg, name, arr)
            shards.append({"index": k, "start": a, "stop": b,
                           "sha256": _sha(m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data)})
        hashes = {}
        for name, values in (("labels", cs.labels), ("ids", cs.ids)):
            hashes[name] = _write_strings(g, name, values)
        src = _open(corpus_path)[group_name(base)]
        vg = g.require_group("vocab")
        vocab_arrays = {name: src[name][...] for name in ("key_ptr", "key_items", "order")}
        for name, arr in vocab_arrays.items():
            _write(vg, name, arr)
        sg = g.require_group("strings")
        for name, strings in cs.vocabs.to_dict().items():
            hashes[f"strings/{name}"] = _write_strings(sg, name, strings)
        kind = cs.representations[base.rep_name]
        meta = {"spec": spec.to_dict(), "base": base.to_dict(), "normalized": spec.kind == "normalized",
                "rep": base.rep_name, "rep_kind": kind if isinstance(kind, str) else base.reads,
                "corpus_path": location(corpus_path).canonical(),
                "corpus_content_hash": cs.content_hash, "n_examples": int(cs.n),
                "n_features": int(fs.n_features), "nnz": nnz, "shards": shards,
                "feature_set": group_name(base), "vocab_sha256": _sha(*(vocab_arrays[k] for k in sorted(vocab_arrays))),
                "strings_sha256": hashes, "uid": uuid.uuid4().hex}
        meta = sealed(meta)  # the attribute bound to itself: sizes, shard hashes, the hashes above
        g.attrs[STORE_ATTR] = meta
        publish_dir(tmp, out, False, "feature store",
                    fix=f"use the store that run wrote, or choose another --out (or delete {out} and run again)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta


def strings_sha256(values) -> str:
    """sha256 of a list of strings as stored in a feature store: their lengths (int64 little endian),
    then the strings concatenated in UTF-8 (about 0.2 s per million short strings, a tenth of
    reading them from the store)."""
    values = [str(x) for x in values]
    h = hashlib.sha256(np.fromiter(map(len, values), "<i8", len(values)).tobytes())
    h.update("".join(values).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _write_strings(g, name, values) -> str:
    """Write a string array; returns :func:`strings_sha256` of its values."""
    g.create_array(name, shape=(len(values),), dtype=str, chunks=(max(1, len(values)),), compressors=_COMPRESSORS)
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
        m = _read_csr(lambda: self._g["rows"][str(s["index"])], s, self.n_features,
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
        if _sha(*(got[k] for k in sorted(got))) != self.meta.get("vocab_sha256"):
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
