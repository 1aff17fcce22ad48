"""Explicit feature sets of a corpus: built once from the kernels' feature maps, stored in its
corpus store, loaded by the product path and the linear learners; the corpus-level feature
vocabulary (:class:`FeatureVocab`); the feature stores of ``gramtile features`` (:func:`write_store`).

The storage side (the groups' layout, shard arrays, checksums, :class:`FeatureStore`) is
:mod:`gramtile.pipeline.stores.feature_store`; everything here that runs a feature map or assigns
feature ids writes through it. The feature set of a base spec is built by the Gram engine's driver
under the corpus store's writer lock, before any tile is submitted (like corpus resources), and
afterwards only loaded, so tiles computed on different workers share feature ids.
"""
from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import zarr

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.maps import LocalFeatures, feature_map, no_map_reason, weights
from gramtile.kernels.maps.subsequence import occurrences
from gramtile.pipeline.cache import current
from gramtile.pipeline.memory import available_memory_mb
from gramtile.pipeline.stores.corpus_store import LOCK_WAIT_SECONDS, CorpusStore, corpus_group, corpus_lock
from gramtile.pipeline.stores.errors import FeatureSetTooLargeError, FeatureSetWriteError, StoreError
from gramtile.pipeline.stores.feature_store import (
    ATTR,
    FORMAT_VERSION,
    STORE_ATTR,
    content_sha256,
    feature_group,
    read_csr,
    set_info,
    write_array,
    write_strings,
)
from gramtile.pipeline.stores.integrity import clean_stale, publish_dir, sealed, temp_sibling
from gramtile.pipeline.stores.storage import disk_summary, is_url, location

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
    return feature_group(base.kind, map_of(base).params(base))


def info(corpus_path, base) -> dict | None:
    """The stored attribute of the base spec's feature set (None when absent or unfinished)."""
    return set_info(corpus_path, group_name(base))


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
    root = corpus_group(corpus_path, mode="r+")
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
            write_array(sg, name, arr)
        shards.append({"index": k, "start": a, "stop": b, "sha256": content_sha256(indptr, indices, m.data)})
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
        write_array(g, name, arr)
    meta = {"kind": base.kind, "params": fmap.params(base), "format_version": FORMAT_VERSION,
            "n_examples": int(cs.n), "n_features": nf, "nnz": int(df.sum()), "shards": shards,
            "corpus_content_hash": cs.content_hash, "build_seconds": round(time.perf_counter() - t0, 3),
            "content_hash": content_sha256(*(arrays[k] for k in sorted(arrays)), *(s["sha256"].encode() for s in shards))}
    g.attrs[ATTR] = meta  # last: marks the group finished
    current().count("feature-meta", "built")  # tests check that tile tasks only load
    return meta


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
        g = corpus_group(corpus_path)[group_name(base)]
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
        return current().load("feature-rows", key, lambda: read_csr(
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
                write_array(sg, name, arr)
            shards.append({"index": k, "start": a, "stop": b,
                           "sha256": content_sha256(m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data)})
        hashes = {}
        for name, values in (("labels", cs.labels), ("ids", cs.ids)):
            hashes[name] = write_strings(g, name, values)
        src = corpus_group(corpus_path)[group_name(base)]
        vg = g.require_group("vocab")
        vocab_arrays = {name: src[name][...] for name in ("key_ptr", "key_items", "order")}
        for name, arr in vocab_arrays.items():
            write_array(vg, name, arr)
        sg = g.require_group("strings")
        for name, strings in cs.vocabs.to_dict().items():
            hashes[f"strings/{name}"] = write_strings(sg, name, strings)
        kind = cs.representations[base.rep_name]
        meta = {"spec": spec.to_dict(), "base": base.to_dict(), "normalized": spec.kind == "normalized",
                "rep": base.rep_name, "rep_kind": kind if isinstance(kind, str) else base.reads,
                "corpus_path": location(corpus_path).canonical(),
                "corpus_content_hash": cs.content_hash, "n_examples": int(cs.n),
                "n_features": int(fs.n_features), "nnz": nnz, "shards": shards,
                "feature_set": group_name(base), "vocab_sha256": content_sha256(*(vocab_arrays[k] for k in sorted(vocab_arrays))),
                "strings_sha256": hashes, "uid": uuid.uuid4().hex}
        meta = sealed(meta)  # the attribute bound to itself: sizes, shard hashes, the hashes above
        g.attrs[STORE_ATTR] = meta
        publish_dir(tmp, out, False, "feature store",
                    fix=f"use the store that run wrote, or choose another --out (or delete {out} and run again)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta
