"""Corpus resources stored in the corpus store: soft-matching similarity matrices and domain spaces.

Kernels name the corpus-level data they need besides their examples (``resources()`` of a
spec, e.g. ``similarity/wordnet``, ``similarity/lsa/lemmas``, ``domain/lsa/100``). For a corpus
store these are **artefacts inside the store**, built once and afterwards only loaded::

    CORPUS.zarr/resources/<name with / as .>-<param hash>/
        zarr.json      attribute "gramtile_resource": name, rep, params, kind, shape,
                       provenance, content_hash
        indptr, indices, data      kind "csr" (WordNet synonymy A = S S^T)
        value                      kind "dense" (LSA factor D, domain factor F = I^IDF D)

- The **param hash** (sha256 of the build parameters: name, representation whose examples
  feed it, LSA dimensions, SVD seed, format version) names the group, so a resource built with
  other parameters never shadows another. The feeding representation is the kernel's
  ``space_rep`` when set (e.g. ``seq``: an LSA space from whole contexts for a kernel reading
  target sentences), else the representation it reads; ``--resources lsa@seq`` names the same
  group.
- The **content hash** (sha256 over kind, dtype, shape and the arrays' bytes) is written last;
  a group without it is an interrupted build and is rebuilt. Loading recomputes it, so a
  corrupt resource is reported (:class:`StoreCorruptError`), never silently used.
- **Provenance** records what fixed the numbers: the corpus content hash, the WordNet directory
  and the sha256 of its index and exception files, the numpy / scipy / scikit-learn versions,
  the vocabulary size, and when and where it was built.
- The corpus content hash does not cover ``resources/``: adding a resource leaves existing
  Gram stores valid. A Gram store records the content hashes of the resources its kernel read
  (:func:`ensure`, called when the store is created or reopened), and reopening it after a
  resource changed is a :class:`StoreMismatchError`.

Builds happen under the corpus store's writer lock (:mod:`gramtile.pipeline.locks`), either
ahead of time (``gramtile prepare --resources wordnet,lsa:100,domain:100``) or on first use by
the Gram engine's driver before any tile is submitted. Tile tasks (Dask workers) only
:func:`load`; a missing resource there is an error, not a rebuild. :data:`stats` counts builds
and loads in this process.

The builders are those of the in-memory path (:func:`build_value`, used by
:func:`gramtile.pipeline.evaluate.add_resources`), fed with every example of the store, so a
spec plus a corpus store give the same K as :func:`gramtile.gram` on the same examples.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from gramtile.kernels.errors import KernelSpecError, StoreCorruptError, StoreError, StoreLockedError

#: Version of the stored layout and of the build recipe (part of every param hash).
FORMAT_VERSION = 1
GROUP = "resources"
ATTR = "gramtile_resource"
#: LSA dimensions and SVD seed of the soft-matching space (kernels name no dimensions for it).
LSA_DIMS = 100
SEED = 0
#: How long a driver waits for another process's build (the corpus store's lock) before failing.
LOCK_WAIT_SECONDS = 600.0

#: Builds and loads of stored resources in this process (tests check workers only load).
stats = {"built": 0, "loaded": 0}
#: Per-process cache of loaded resources: (corpus path, group path, content hash) -> value.
_loaded: dict = {}

_HELP = ("valid items: 'wordnet', 'lsa' or 'lsa:100' (the soft-matching LSA space over lemmas), "
         "'domain' or 'domain:DIMS' (the domain kernel's space, DIMS an integer >= 1), each optionally "
         "followed by '@REP' (a representation of the store); e.g. --resources wordnet,lsa:100,domain:100")


@dataclass(frozen=True)
class ResourceKey:
    """One resource: the name kernels use, and the representation whose examples build it.

    ``rep`` is None for resources of the vocabulary alone (WordNet synonymy).
    """

    name: str
    rep: str | None = None

    def params(self) -> dict:
        """Build parameters; their hash names the stored group."""
        p = {"format": FORMAT_VERSION, "name": self.name, "rep": self.rep}
        if self.name.startswith("similarity/lsa/"):
            p.update(dims=LSA_DIMS, random_state=SEED, field=self.name.rsplit("/", 1)[1])
        elif self.name.startswith("domain/lsa/"):
            p.update(dims=int(self.name.rsplit("/", 1)[1]), random_state=SEED, idf="log(N/df)")
        return p

    @property
    def param_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.params(), sort_keys=True).encode()).hexdigest()[:16]

    @property
    def group(self) -> str:
        """Path of the resource's group inside the corpus store."""
        return f"{GROUP}/{self.name.replace('/', '.')}-{self.param_hash}"


def keys_of(spec) -> list:
    """The :class:`ResourceKey` of every resource the spec's base kernels name, in order.

    Each key's representation is the kernel's ``space_rep`` when set, else the representation
    it reads (:func:`gramtile.pipeline.evaluate.resource_rep`); ``--resources lsa@seq`` builds the
    key of ``similarity: lsa, space_rep: seq``.

    Raises
    ------
    KernelSpecError
        Two base kernels need one resource name from different representations.
    """
    from gramtile.pipeline.evaluate import resource_reps

    # the feeding representation is the kernel's space_rep when set, else the one it reads
    return [ResourceKey(name, rep) for name, rep in resource_reps(spec).items()]


# ---- building ------------------------------------------------------------------------------

def build_value(name: str, vocab_strings, structs):
    """Build resource ``name`` over the symbols ``vocab_strings`` from the structures ``structs``.

    The one builder of both paths: :func:`gramtile.pipeline.evaluate.add_resources` (in-memory
    examples) and :func:`ensure` (every example of a corpus store).

    Parameters
    ----------
    name : str
        ``similarity/wordnet``, ``similarity/lsa/<field>`` or ``domain/lsa/<dims>``.
    vocab_strings : sequence of str
        Symbol strings in id order (``Vocabularies.sym.strings``).
    structs : list of structures
        The examples of the representation the kernel reads (unused by WordNet).

    Returns
    -------
    scipy.sparse.csr_matrix (WordNet) or ndarray of shape (V, k) (LSA / domain factors)
    """
    if name.startswith("domain/"):
        from gramtile.pipeline.domain import domain_resource

        return domain_resource(name, vocab_strings, structs)
    from gramtile.pipeline.similarity import similarity_resource

    docs = None
    if name.startswith("similarity/lsa/"):
        field = name.rsplit("/", 1)[1]
        docs = [list(getattr(x, field) or ()) for x in structs]
    return similarity_resource(name, vocab_strings, docs)


#: The arrays that store a resource value of each kind.
ARRAY_NAMES = {"csr": ("indptr", "indices", "data"), "dense": ("value",)}


def arrays_of(value) -> tuple:
    """(kind, {array name: ndarray}) of a resource value, in the stored order (inverse of
    :func:`value_of`)."""
    import scipy.sparse as sp

    if sp.issparse(value):
        A = value.tocsr()
        return "csr", {"indptr": np.asarray(A.indptr, dtype=np.int64),
                       "indices": np.asarray(A.indices, dtype=np.int32),
                       "data": np.asarray(A.data, dtype=np.float64)}
    return "dense", {"value": np.ascontiguousarray(value, dtype=np.float64)}


def value_of(kind: str, shape, arrays: dict):
    """The resource value stored as ``arrays`` (a CSR matrix of ``shape``, or the dense factor)."""
    if kind == "csr":
        import scipy.sparse as sp

        return sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(shape))
    return arrays["value"]


def content_hash(kind: str, shape, arrays: dict) -> str:
    """sha256 over kind, shape and each array's name, dtype, shape and little-endian bytes."""
    h = hashlib.sha256(json.dumps({"kind": kind, "shape": [int(s) for s in shape]}).encode())
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        a = a.astype(a.dtype.newbyteorder("<"))
        h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _provenance(key: ResourceKey, cs) -> dict:
    import scipy
    import sklearn

    prov = {"corpus_content_hash": cs.content_hash, "vocab_size": len(cs.vocabs.sym.strings),
            "n_examples": int(cs.n), "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit_learn": sklearn.__version__,
            "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "pid": os.getpid()}
    if key.name == "similarity/wordnet":
        from gramtile.pipeline.similarity import WORDNET_DIR, _POS_FILES

        files = [f"index.{f}" for f in _POS_FILES.values()] + [f"{f}.exc" for f in _POS_FILES.values()]
        prov["wordnet"] = {"path": str(WORDNET_DIR), "version": "3.0 (Debian wordnet-base)",
                           "sha256": {f: _file_sha256(WORDNET_DIR / f) for f in files
                                      if (WORDNET_DIR / f).is_file()}}
    return prov


def _build_into(group, key: ResourceKey, cs) -> str:
    """Build ``key`` from corpus store ``cs`` and write it into zarr ``group``; return its content hash."""
    from zarr.codecs import Crc32cCodec, ZstdCodec

    from gramtile.pipeline.encode import decode

    t0 = time.perf_counter()
    vocab = cs.vocabs.sym.strings
    structs = [] if key.rep is None else decode(cs.load(key.rep, 0, cs.n), cs.vocabs)
    value = build_value(key.name, vocab, structs)
    stats["built"] += 1
    kind, arrays = arrays_of(value)
    shape = tuple(int(s) for s in value.shape)
    # arrays first, the attribute with the content hash last: a group without it is unfinished
    g = group.require_group(GROUP).require_group(key.group.split("/", 1)[1])
    for name, a in arrays.items():
        g.create_array(name, data=a, chunks=(max(1, a.shape[0]),) + a.shape[1:],
                       compressors=(ZstdCodec(level=3), Crc32cCodec()), overwrite=True)
    digest = content_hash(kind, shape, arrays)
    g.attrs[ATTR] = {"name": key.name, "rep": key.rep, "params": key.params(), "kind": kind,
                     "shape": list(shape), "content_hash": digest,
                     "build_seconds": round(time.perf_counter() - t0, 3), "provenance": _provenance(key, cs)}
    return digest


# ---- reading ---------------------------------------------------------------------------------

def _open_group(corpus_path, mode="r"):
    import zarr

    from gramtile.pipeline.storage import location

    loc = location(corpus_path)
    if not loc.exists("zarr.json"):
        raise StoreError(f"no corpus store at {loc}. Fix: create it with `gramtile prepare --out {loc}`")
    return zarr.open_group(loc.zarr_store(), mode=mode)


def info(corpus_path, key: ResourceKey) -> dict | None:
    """The stored attribute of ``key`` (``None`` when absent or unfinished)."""
    g = _open_group(corpus_path)
    try:
        node = g[key.group]
    except KeyError:
        return None
    meta = node.attrs.get(ATTR)
    return dict(meta) if meta and meta.get("content_hash") else None


def stored(corpus_path) -> list:
    """Attributes of every finished resource in the store (for inspection)."""
    g = _open_group(corpus_path)
    if GROUP not in g:
        return []
    out = []
    for name, node in sorted(g[GROUP].groups()):
        meta = node.attrs.get(ATTR)
        if meta and meta.get("content_hash"):
            out.append({"group": f"{GROUP}/{name}", **meta})
    return out


def load(corpus_path, key: ResourceKey, expect_hash: str | None = None):
    """Load a stored resource, checking its content hash (cached per process).

    Raises
    ------
    StoreError
        The resource is not in the store (workers never build it).
    StoreCorruptError
        Its arrays fail their checksums or no longer match the recorded content hash.
    StoreMismatchError
        ``expect_hash`` is given and differs (the resource changed).
    """
    from gramtile.kernels.errors import StoreMismatchError

    meta = info(corpus_path, key)
    if meta is None:
        raise StoreError(
            f"corpus store {corpus_path} has no resource {key.name!r} (group {key.group}, built from "
            f"representation {key.rep!r}). Fix: build it with `gramtile prepare --resources ...` on this store, "
            f"or run `gramtile gram`, whose driver builds it before submitting tiles")
    if expect_hash is not None and meta["content_hash"] != expect_hash:
        raise StoreMismatchError(
            f"resource {key.group} of corpus store {corpus_path} has content hash {meta['content_hash'][:16]}..., "
            f"expected {expect_hash[:16]}...; it was rebuilt or replaced. Fix: recompute the Gram store in a "
            f"new --out")
    from gramtile.pipeline.storage import location

    ck = (location(corpus_path).canonical(), key.group, meta["content_hash"])
    hit = _loaded.get(ck)
    if hit is not None:
        return hit
    g = _open_group(corpus_path)[key.group]
    try:
        arrays = {n: g[n][...] for n in ARRAY_NAMES[meta["kind"]]}
    except KeyError as e:
        raise StoreCorruptError(f"resource {key.group} of corpus store {corpus_path} lacks array {e}. Fix: delete "
                                f"that group and rebuild it (`gramtile prepare --resources ...`)") from None
    except Exception as e:  # a failed crc32c check surfaces as a codec error
        raise StoreCorruptError(f"resource {key.group} of corpus store {corpus_path} cannot be read ({e}). Fix: "
                                f"delete that group and rebuild it (`gramtile prepare --resources ...`)") from None
    if content_hash(meta["kind"], meta["shape"], arrays) != meta["content_hash"]:
        raise StoreCorruptError(f"resource {key.group} of corpus store {corpus_path} does not match its recorded "
                                f"content hash {meta['content_hash'][:16]}...: it is corrupt. Fix: delete that "
                                f"group and rebuild it (`gramtile prepare --resources ...`)")
    value = value_of(meta["kind"], meta["shape"], arrays)
    stats["loaded"] += 1
    _loaded[ck] = value
    return value


# ---- ensuring (driver / prepare) ---------------------------------------------------------------

def _lock(corpus_path, wait: float):
    from gramtile.pipeline.storage import location

    lock = location(corpus_path).lock(".lock", f"corpus store {corpus_path}")
    deadline = time.monotonic() + wait
    while True:
        try:
            return lock.acquire()
        except StoreLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def ensure(corpus_path, keys, wait: float = LOCK_WAIT_SECONDS) -> dict:
    """Build the resources ``keys`` that the corpus store lacks; return their content hashes.

    Builds run under the store's writer lock and re-check after taking it, so two drivers never
    build the same resource twice. Resources already stored are not touched.

    Returns
    -------
    dict group path -> {"name", "rep", "content_hash", "built": bool}
    """
    from gramtile.pipeline.corpus_store import CorpusStore

    keys = list(keys)
    out = {k.group: info(corpus_path, k) for k in keys}
    missing = [k for k in keys if out[k.group] is None]
    built = set()
    if missing:
        cs = CorpusStore.open(corpus_path)
        if not cs.complete:
            raise StoreError(f"corpus store {corpus_path} is incomplete; resources are built from the whole "
                             f"corpus. Fix: rerun `gramtile prepare` to finish it first")
        for k in missing:
            if k.rep is not None and k.rep not in cs.representations:
                raise KernelSpecError(f"resource {k.name!r} is built from representation {k.rep!r}, which corpus "
                                      f"store {corpus_path} does not hold (it holds {sorted(cs.representations)}); "
                                      f"name one of those")
        lock = _lock(corpus_path, wait)
        try:
            group = _open_group(corpus_path, mode="r+")
            for k in missing:
                if info(corpus_path, k) is None:  # another driver may have built it while we waited
                    _build_into(group, k, cs)
                    built.add(k.group)
        finally:
            lock.release()
    return {k.group: {"name": k.name, "rep": k.rep, "content_hash": info(corpus_path, k)["content_hash"],
                      "built": k.group in built} for k in keys}


def ensure_for_spec(corpus_path, spec) -> dict:
    """:func:`ensure` of every resource ``spec`` names; ``{}`` (no store access) when it names none.

    Returns ``{group path: content hash}``, the form Gram-store provenance records.
    """
    keys = keys_of(spec)
    if not keys:
        return {}
    return {g: r["content_hash"] for g, r in ensure(corpus_path, keys).items()}


def load_for_spec(corpus_path, spec) -> dict:
    """``{resource name: value}`` of every resource ``spec`` names, loaded (never built)."""
    return {k.name: load(corpus_path, k) for k in keys_of(spec)}


# ---- the --resources option --------------------------------------------------------------------

def parse_option(text: str) -> list:
    """Parse ``--resources`` (``wordnet,lsa:100,domain:100[@REP]``) into (kind, dims, rep) items.

    Raises
    ------
    KernelSpecError
        Naming the parameter, the bad item and the valid values.
    """
    if not isinstance(text, str) or not text.strip():
        raise KernelSpecError(f"parameter --resources = {text!r} is empty; {_HELP}")
    items = []
    for raw in text.split(","):
        item = raw.strip()
        base, _, rep = item.partition("@")
        kind, _, dims = base.partition(":")
        bad = None
        if kind not in ("wordnet", "lsa", "domain"):
            bad = f"unknown resource {kind!r}"
        elif kind == "wordnet" and dims:
            bad = "wordnet takes no dimensions"
        elif kind == "wordnet" and rep:
            bad = "wordnet depends on the vocabulary only and takes no '@REP'"
        elif dims and not (dims.isdigit() and int(dims) >= 1):
            bad = f"dimensions {dims!r} are not an integer >= 1"
        elif kind == "lsa" and dims and int(dims) != LSA_DIMS:
            bad = (f"the soft-matching kernels read a {LSA_DIMS}-dimensional LSA space, so lsa:{dims} would "
                   f"never be used")
        elif "@" in item and not rep:
            bad = "'@' must be followed by a representation name"
        if bad:
            raise KernelSpecError(f"parameter --resources: item {item!r}: {bad}; {_HELP}")
        d = int(dims) if dims else (LSA_DIMS if kind == "lsa" else 100)
        items.append((kind, d, rep or None))
    return items


def keys_for_option(text: str, representations: dict) -> list:
    """The :class:`ResourceKey` list of a ``--resources`` value for a store with ``representations``
    (name -> kind). Without ``@REP`` an LSA or domain item covers every representation it can be
    built from (kinds ``seq`` and ``wsd``: the examples with lemmas and words)."""
    keys = []
    usable = [r for r, kind in sorted(representations.items()) if kind in ("seq", "wsd")]
    for kind, dims, rep in parse_option(text):
        if kind == "wordnet":
            keys.append(ResourceKey("similarity/wordnet"))
            continue
        if rep is not None and rep not in representations:
            raise KernelSpecError(f"parameter --resources: representation {rep!r} is not in the store (it holds "
                                  f"{sorted(representations)}); {_HELP}")
        reps = [rep] if rep else usable
        if not reps:
            raise KernelSpecError(f"parameter --resources: {kind} needs a representation of kind seq or wsd, "
                                  f"the store holds {representations}; drop {kind!r} from --resources")
        name = "similarity/lsa/lemmas" if kind == "lsa" else f"domain/lsa/{dims}"
        keys.extend(ResourceKey(name, r) for r in reps)
    return list(dict.fromkeys(keys))


# ---- re-indexing (saved models) ------------------------------------------------------------------

def map_value(value, strings, onto):
    """Re-index a resource value built over the symbols ``strings`` onto the symbols ``onto``.

    A saved model carries the resources its kernel read at training, indexed by the training
    vocabulary; prediction encodes its examples over another vocabulary. A symbol of ``onto``
    seen at training keeps its row (dense factor) or its entries with every other seen symbol
    (CSR similarity). A symbol unseen at training is *out of the space*, as a word outside the
    corpus in LSA / domain models: a zero factor row (zero domain vector; in soft matching it
    then matches only itself, since the kernel takes 1 on the diagonal of an LSA factor) or, for
    a CSR matrix, a unit diagonal entry and nothing else (exact matching).

    Parameters
    ----------
    value : scipy.sparse matrix (V, V) or ndarray (V, k)
    strings : sequence of str
        The symbols indexing ``value`` (length V), in id order.
    onto : sequence of str
        The target symbols in id order.

    Returns
    -------
    scipy.sparse.csr_matrix (n, n) with sorted indices, or ndarray (n, k); n = len(onto).
    """
    import scipy.sparse as sp

    index = {s: i for i, s in enumerate(strings)}
    src = np.fromiter((index.get(s, -1) for s in onto), dtype=np.int64, count=len(onto))
    seen = src >= 0
    n = len(onto)
    if sp.issparse(value):
        A = value.tocsr()
        if A.shape != (len(index), len(index)):
            raise KernelSpecError(f"resource matrix of shape {A.shape} does not match its {len(index)} symbols")
        new = np.flatnonzero(seen)
        P = sp.csr_matrix((np.ones(new.size), (new, src[seen])), shape=(n, A.shape[0]))
        M = (P @ A @ P.T).tocsr()
        # unseen symbols: exact matching only (unit diagonal), as a word without synsets
        M = (M + sp.diags((~seen).astype(np.float64), format="csr")).tocsr()
        M.sum_duplicates()
        M.sort_indices()
        return M
    F = np.asarray(value, dtype=np.float64)
    if F.ndim != 2 or F.shape[0] != len(index):
        raise KernelSpecError(f"resource factor of shape {F.shape} does not match its {len(index)} symbols")
    out = np.zeros((n, F.shape[1]))
    out[seen] = F[src[seen]]
    return out
