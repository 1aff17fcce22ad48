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
  (:func:`~gramtile.pipeline.compute.resource_builds.ensure`, called when the store is created or reopened), and reopening it after a
  resource changed is a :class:`StoreMismatchError`.

Builds happen under the corpus store's writer lock (:mod:`gramtile.pipeline.stores.locks`), either
ahead of time (``gramtile prepare --resources wordnet,lsa:100,domain:100``) or on first use by
the Gram engine's driver before any tile is submitted. Tile tasks (Dask workers) only
:func:`load`; a missing resource there is an error, not a rebuild. Loaded values are kept in the
run's cache (:mod:`gramtile.pipeline.cache`, namespace ``resources``), which counts loads and builds.

Building is computing: :mod:`gramtile.pipeline.compute.resource_builds` (:func:`~gramtile.pipeline.compute.resource_builds.ensure`) runs the
builders and stores what they give through :func:`write`. The builders are those of the in-memory path (:func:`build_value`, used by
:func:`gramtile.pipeline.compute.inmemory.add_resources`), fed with every example of the store, so a
spec plus a corpus store give the same K as :func:`gramtile.gram` on the same examples.
"""
from __future__ import annotations

from zarr.codecs import Crc32cCodec, ZstdCodec

from gramtile.pipeline.cache import current
from gramtile.pipeline.resources.build import ARRAY_NAMES, content_hash, value_of
from gramtile.pipeline.resources.keys import GROUP, ResourceKey, keys_of
from gramtile.pipeline.stores.corpus_store import corpus_group
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError, StoreMismatchError
from gramtile.pipeline.stores.storage import location

ATTR = "gramtile_resource"


def write(corpus_path, key: ResourceKey, kind: str, shape: tuple, arrays: dict, meta: dict) -> str:
    """Store a built resource ``key`` (its arrays, then its attribute with the content hash, last: a
    group without it is unfinished) into the corpus store at ``corpus_path``, which the caller holds
    the writer lock of; ``meta`` adds to the attribute (build time, provenance). Returns the
    content hash."""
    g = corpus_group(corpus_path, mode="r+").require_group(GROUP).require_group(key.group.split("/", 1)[1])
    for name, a in arrays.items():
        g.create_array(name, data=a, chunks=(max(1, a.shape[0]),) + a.shape[1:],
                       compressors=(ZstdCodec(level=3), Crc32cCodec()), overwrite=True)
    digest = content_hash(kind, shape, arrays)
    g.attrs[ATTR] = {"name": key.name, "rep": key.rep, "params": key.params(), "kind": kind,
                     "shape": list(shape), "content_hash": digest, **meta}
    return digest


def info(corpus_path, key: ResourceKey) -> dict | None:
    """The stored attribute of ``key`` (``None`` when absent or unfinished)."""
    g = corpus_group(corpus_path)
    try:
        node = g[key.group]
    except KeyError:
        return None
    meta = node.attrs.get(ATTR)
    return dict(meta) if meta and meta.get("content_hash") else None


def stored(corpus_path) -> list:
    """Attributes of every finished resource in the store (for inspection)."""
    g = corpus_group(corpus_path)
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
    g = corpus_group(corpus_path)[key.group]
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


def load_for_spec(corpus_path, spec) -> dict:
    """``{resource name: value}`` of every resource ``spec`` names, loaded (never built)."""
    return {k.name: load(corpus_path, k) for k in keys_of(spec)}
