"""Building corpus resources (similarity matrices, domain spaces, word vectors, SPTK tables) into a
corpus store: :func:`ensure` builds what a store lacks, under its writer lock, with the builders of
:mod:`gramtile.pipeline.resources.build`, and stores each through
:mod:`gramtile.pipeline.stores.resource_store` (layout, loading, checks), with its provenance.
Called ahead of time by ``gramtile prepare --resources`` or by the Gram engine's driver before any
tile is submitted; tile tasks only load.
"""
from __future__ import annotations

import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import scipy

from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline import optional
from gramtile.pipeline.cache import current
from gramtile.pipeline.checksums import file_sha256
from gramtile.pipeline.representations.encode import decode
from gramtile.pipeline.resources.build import arrays_of, build_value
from gramtile.pipeline.resources.keys import VECTORS, ResourceKey, keys_of, table_vectors_key
from gramtile.pipeline.resources.lexical import PREFIX as LEXICAL_PREFIX
from gramtile.pipeline.resources.lexical import table_params
from gramtile.pipeline.resources.similarity import POS_FILES, WORDNET_DIR
from gramtile.pipeline.resources.vector_sources import builder_of, source_files, source_kind
from gramtile.pipeline.stores.corpus_store import LOCK_WAIT_SECONDS, CorpusStore, corpus_lock
from gramtile.pipeline.stores.errors import StoreError, StoreMismatchError
from gramtile.pipeline.stores.resource_store import info, load, write


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


def _build_into(corpus_path, key: ResourceKey, cs) -> str:
    """Build ``key`` from corpus store ``cs`` and store it (:func:`~gramtile.pipeline.stores.resource_store.write`);
    return its content hash. An SPTK table of source ``vectors`` reads the stored vectors of its
    source (built before it by :func:`ensure`)."""
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
    return write(corpus_path, key, kind, shape, arrays, {"build_seconds": round(time.perf_counter() - t0, 3),
                                                        "provenance": _provenance(key, cs, vectors_meta)})


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
            for k in missing:
                if info(corpus_path, k) is None:  # another driver may have built it while we waited
                    _build_into(corpus_path, k, cs)
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
