"""Corpus resources stored in the corpus store: soft-matching similarity matrices and domain spaces.

Kernels name the corpus-level data they need besides their examples (``resources()`` of a
spec, e.g. ``similarity/wordnet``, ``similarity/lsa/lemmas``, ``domain/lsa/100``). For a corpus
store these are **artefacts inside the store**, built once and afterwards only loaded::

    CORPUS.zarr/resources/<name with / as .>-<param hash>/
        zarr.json      attribute "gramtile_resource": name, rep, params, kind, shape,
                       provenance, content_hash
        indptr, indices, data      kind "csr" (WordNet synonymy A = S S^T)
        value                      kind "dense" (LSA factor D, domain factor F = I^IDF D)
    CORPUS.zarr/resources/sptk-<param hash>/   the SPTK lexical similarity table (kind "csr";
                                               its name ``sptk:{...}`` holds JSON, so the group is
                                               named by the param hash alone)
    CORPUS.zarr/resources/vectors-<param hash>/  the word vectors of one vector source (kind
                                               "vectors": value, word_bytes, word_ends), which
                                               the SPTK tables of that source are built from

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
  and the sha256 of its index and exception files, the files of stored vectors and of the SPTK
  tables built from them (path, size, sha256; a table also names the stored vectors' content hash), the numpy / scipy / scikit-learn versions,
  the vocabulary size, and when and where it was built.
- The corpus content hash does not cover ``resources/``: adding a resource leaves existing
  Gram stores valid. A Gram store records the content hashes of the resources its kernel read
  (:func:`ensure`, called when the store is created or reopened), and reopening it after a
  resource changed is a :class:`StoreMismatchError`.

Builds happen under the corpus store's writer lock (:mod:`gramtile.pipeline.stores.locks`), either
ahead of time (``gramtile prepare --resources wordnet,lsa:100,domain:100``) or on first use by
the Gram engine's driver before any tile is submitted. Tile tasks (Dask workers) only
:func:`load`; a missing resource there is an error, not a rebuild. Loaded values are kept in the
run's cache (:mod:`gramtile.pipeline.cache`, namespace ``resources``), which counts loads and builds.

The builders are those of the in-memory path (:func:`build_value`, used by
:func:`gramtile.pipeline.compute.inmemory.add_resources`), fed with every example of the store, so a
spec plus a corpus store give the same K as :func:`gramtile.gram` on the same examples.
"""
from __future__ import annotations

import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import scipy
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline import optional
from gramtile.pipeline.cache import current
from gramtile.pipeline.checksums import file_sha256
from gramtile.pipeline.representations.encode import decode
from gramtile.pipeline.resources.build import ARRAY_NAMES, arrays_of, build_value, content_hash, value_of
from gramtile.pipeline.resources.keys import GROUP, VECTORS, ResourceKey, keys_of, table_vectors_key
from gramtile.pipeline.resources.lexical import PREFIX as LEXICAL_PREFIX
from gramtile.pipeline.resources.lexical import table_params
from gramtile.pipeline.resources.similarity import POS_FILES, WORDNET_DIR
from gramtile.pipeline.resources.vector_sources import builder_of, source_files, source_kind
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError, StoreLockedError, StoreMismatchError
from gramtile.pipeline.stores.storage import location

ATTR = "gramtile_resource"
#: How long a driver waits for another process's build (the corpus store's lock) before failing.
LOCK_WAIT_SECONDS = 600.0



def _provenance(key: ResourceKey, cs, vectors_meta: dict | None = None) -> dict:
    sklearn = optional.sklearn("")

    prov = {"corpus_content_hash": cs.content_hash, "vocab_size": len(cs.vocabs.sym.strings),
            "n_examples": int(cs.n), "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit_learn": sklearn.__version__,
            "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "pid": os.getpid()}
    lexical = table_params(key.name) if key.name.startswith(LEXICAL_PREFIX) else None
    if key.name.startswith(VECTORS):
        # the vector source: its files, their size and sha256 (a changed file is refused later)
        source = key.name[len(VECTORS):]
        prov["source"] = source
        prov["vectors"] = [{"path": str(f), "bytes": f.stat().st_size, "sha256": file_sha256(f)}
                           for f in source_files(source) if f.is_file()]
        if source_kind(source) == "corpus" and builder_of(source) == "word2vec":
            prov["gensim"] = optional.load("gensim").__version__
    if lexical is not None and lexical["source"] == "vectors" and vectors_meta is not None:
        # the stored vectors the table was built from, and their files (the table's own content
        # hash is what Gram stores record; this says which vectors gave it)
        prov["vectors_resource"] = {"group": vectors_meta["group"], "content_hash": vectors_meta["content_hash"]}
        prov["vectors"] = list(vectors_meta["provenance"].get("vectors", []))
    if key.name == "similarity/wordnet" or (lexical is not None and lexical["source"] == "wordnet"):

        files = [f"index.{f}" for f in POS_FILES.values()] + [f"{f}.exc" for f in POS_FILES.values()]
        prov["wordnet"] = {"path": str(WORDNET_DIR), "version": "3.0 (Debian wordnet-base)",
                           "sha256": {f: file_sha256(WORDNET_DIR / f) for f in files
                                      if (WORDNET_DIR / f).is_file()}}
    return prov


def _build_into(group, key: ResourceKey, cs, corpus_path) -> str:
    """Build ``key`` from corpus store ``cs`` and write it into zarr ``group``; return its content
    hash. An SPTK table of source ``vectors`` reads the stored vectors of its source (built
    before it by :func:`ensure`)."""
    t0 = time.perf_counter()
    vocab = cs.vocabs.sym.strings
    structs = [] if key.rep is None else decode(cs.load(key.rep, 0, cs.n), cs.vocabs)
    vkey = table_vectors_key(key)
    vectors = vectors_meta = None
    if vkey is not None:
        vectors = load(corpus_path, vkey)
        vectors_meta = {"group": vkey.group, **info(corpus_path, vkey)}
    value = build_value(key.name, vocab, structs, vectors)
    current().count("resources", "built")  # tests check that workers only load
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
                     "build_seconds": round(time.perf_counter() - t0, 3),
                     "provenance": _provenance(key, cs, vectors_meta)}
    return digest


# ---- reading ---------------------------------------------------------------------------------

def _open_group(corpus_path, mode="r"):


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

    ck = (location(corpus_path).canonical(), key.group, meta["content_hash"])
    return current().load("resources", ck, lambda: _read(corpus_path, key, meta))


def _read(corpus_path, key: ResourceKey, meta: dict):
    """The stored value of resource ``key``, checked against its content hash."""
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
    return value_of(meta["kind"], meta["shape"], arrays)


# ---- ensuring (driver / prepare) ---------------------------------------------------------------

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


def ensure(corpus_path, keys, wait: float = LOCK_WAIT_SECONDS) -> dict:
    """Build the resources ``keys`` that the corpus store lacks; return their content hashes.

    Builds run under the store's writer lock and re-check after taking it, so two drivers never
    build the same resource twice. Resources already stored are not touched.

    Returns
    -------
    dict group path -> {"name", "rep", "content_hash", "built": bool}
    """

    keys = list(keys)
    out = {k.group: info(corpus_path, k) for k in keys}
    for k in keys:
        if out[k.group] is not None:
            check_sources(corpus_path, k, out[k.group])
    missing = [k for k in keys if out[k.group] is None]
    # the stored vectors an SPTK table is built from come first (kept, and checked, when stored)
    deps = list(dict.fromkeys(v for v in map(table_vectors_key, missing) if v is not None))
    if deps:
        ensure(corpus_path, deps, wait)
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
        lock = corpus_lock(corpus_path, wait)
        try:
            group = _open_group(corpus_path, mode="r+")
            for k in missing:
                if info(corpus_path, k) is None:  # another driver may have built it while we waited
                    _build_into(group, k, cs, corpus_path)
                    built.add(k.group)
        finally:
            lock.release()
    return {k.group: {"name": k.name, "rep": k.rep, "content_hash": info(corpus_path, k)["content_hash"],
                      "built": k.group in built} for k in keys}


def check_sources(corpus_path, key: ResourceKey, meta: dict):
    """Stored vectors, and a table built from them, name their files (a vector file, a spaCy
    pipeline's vector table) by path, size and sha256: a file changed since would leave them (and
    every Gram store made with them) describing other vectors, so it is refused, with the fix,
    rather than silently reused."""
    for v in (meta.get("provenance") or {}).get("vectors", []):
        f = Path(v["path"])
        now = file_sha256(f) if f.is_file() else None
        if now != v["sha256"]:
            what = "is gone" if now is None else f"changed (sha256 {v['sha256'][:12]} when it was built, " \
                                                 f"{now[:12]} now)"
            raise StoreMismatchError(
                f"{corpus_path}: resource {key.name!r} was built from the vector file {f}, which {what}. Fix: "
                "give the new vectors another file name (new vectors and tables are built for them), or restore "
                "the file")


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
