"""Block evaluation of kernel specs on in-memory batches, and the ``gram`` convenience.

:func:`evaluate_block` is the one place where a spec meets data: it computes each distinct base
spec's block and diagonals once and lets composites combine them. The tiled engine calls it per
tile; :func:`gram` calls it once on small inputs.
"""
from __future__ import annotations

import numpy as np

from gramtile.kernels.batches import Batch
from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import as_spec
from gramtile.kernels.spec import DEFAULT_REP
from gramtile.pipeline.compute.compilation import announce, mark_compiled
from gramtile.pipeline.parsing.convert import parse
from gramtile.pipeline.readers.table import table_kind
from gramtile.pipeline.representations.encode import KIND_OF_TYPE, encode, kind_of
from gramtile.pipeline.representations.structures import Document
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.resources.build import build_value
from gramtile.pipeline.resources.keys import resource_names, resource_reps


def batch_for(data, base):
    """The batch a base spec reads from ``data`` (a Batch, or a mapping name -> Batch), read-only
    (:meth:`Batch.readonly`: the cores are compiled for one array signature, not two); for a
    kernel over two fields of each example (``rep_names``), the mapping of both fields' batches."""
    if len(base.rep_names) > 1:
        missing = [] if isinstance(data, Batch) else [r for r in base.rep_names if r not in data]
        if isinstance(data, Batch) or missing:
            have = [data.kind] if isinstance(data, Batch) else sorted(data)
            raise KernelSpecError(f"kernel {base.kind!r} compares the representations {list(base.rep_names)} of each "
                                  f"example, which the examples do not all have (they have {have}); set its "
                                  f"'fields' to two of the examples' fields")
        return {r: data[r].readonly() for r in base.rep_names}
    if isinstance(data, Batch):
        if data.kind != base.reads:
            raise KernelSpecError(f"kernel {base.kind!r} reads {base.reads!r} examples, got a {data.kind!r} batch")
        return data.readonly()
    rep = base.rep_name
    if rep not in data:
        raise KernelSpecError(f"kernel {base.kind!r} reads representation {rep!r}, which the examples do not have "
                              f"(they have {sorted(data)}); set the spec's 'rep' to one of those")
    return data[rep].readonly()


def resources_for(data, base):
    names = resource_names(base)
    if not names:
        return {}
    if isinstance(data, Batch) or any(n not in data for n in names):
        have = [] if isinstance(data, Batch) else sorted(data)
        raise KernelSpecError(f"kernel {base.kind!r} needs the resources {list(names)} with its examples "
                              f"(they have {have}); build them with gramtile.pipeline.resources.similarity or use "
                              f"gramtile.gram(), which builds them")
    return {"resources": {n: data[n] for n in names}}


def base_block(base, X, Y=None):
    """(K, diag_rows, diag_cols) of one base spec; Y=None means the symmetric block X x X.

    Resources (see :func:`resource_names`) are taken from the row data X: they are corpus-level
    and cover the column examples too.
    """
    bx = batch_for(X, base)
    kw = resources_for(X, base)
    if Y is None:
        K = base.block(bx, **kw)
        d = base.diag(bx, **kw)
        return K, d, d
    by = batch_for(Y, base)
    return base.block(bx, by, **kw), base.diag(bx, **kw), base.diag(by, **kw)


def evaluate_block(spec, X, Y=None, done=None):
    """Evaluate ``spec`` on row examples X and column examples Y (None: Y = X).

    Parameters
    ----------
    spec : KernelSpec
    X, Y : Batch or mapping of representation name -> Batch (same examples across names).
        X also carries the resources its base kernels name (:func:`resource_names`).
    done : dict, optional
        ``{base spec hash: (K, diag_X, diag_Y)}`` of base kernels already evaluated another way
        (the product path, :mod:`gramtile.pipeline.compute.product`); the others are evaluated here.

    Returns
    -------
    K : ndarray, float64, shape (n_X, n_Y)
    diag_X : ndarray, shape (n_X,)
    diag_Y : ndarray, shape (n_Y,)
    """
    spec = as_spec(spec)
    done = done or {}
    base = {b.spec_hash: done[b.spec_hash] if b.spec_hash in done else base_block(b, X, Y) for b in spec.base_specs()}
    K, dx, dy = spec.combine(base)
    return np.ascontiguousarray(K, dtype=np.float64), dx, dy


def _structures(items):
    """Normalise user input to a mapping rep name -> list of structures.

    Structures of one kind and Documents with structures are used as they are; anything else
    :func:`gramtile.pipeline.parsing.convert.parse` reads (spaCy Docs, conllu TokenLists, bracket
    strings, raw text) is converted by it first.
    """
    if isinstance(items, dict):
        return {k: list(v) for k, v in items.items()}
    if table_kind(items) in ("frame", "series", "arrow", "dataset"):  # a table's texts (list of dicts: bags)
        items = parse(items, what="gramtile.gram")
    if isinstance(items, (str, bytes)):
        raise TypeError("gramtile.gram() takes a list of examples, got a single string; wrap it: [text]")
    items = list(items)
    if not items:
        raise ValueError("gram() needs at least one example")
    kinds = {type(x) for x in items}
    if not (kinds == {Document} and all(d.structures for d in items)) and \
            not (len(kinds) == 1 and (kinds <= set(KIND_OF_TYPE) or isinstance(items[0], dict))):
        items = parse(items, what="gramtile.gram")
    if isinstance(items[0], Document):
        names = set(items[0].structures)
        return {n: [d.structures[n] for d in items] for n in names if all(n in d.structures for d in items)}
    return {DEFAULT_REP[kind_of(items[0])]: items}


def gram(spec, X, Y=None) -> np.ndarray:
    """In-memory Gram matrix for small inputs.

    Parameters
    ----------
    spec : KernelSpec, dict or JSON string (``@file`` allowed)
    X, Y : list of structures (Tree, DepTree, TokenSeq, PTree, ...), list of Documents, a
        mapping representation name -> list of structures, or a list of what
        ``gramtile.parse`` reads (spaCy Docs, conllu TokenLists, bracket strings, raw text),
        converted by it. Y=None gives the square K(X, X).
        Resources a kernel needs (similarity matrices for soft matching) are built from these
        examples: WordNet over their combined vocabulary, LSA from their sequences.

    Returns
    -------
    ndarray of shape (len(X), len(Y)), float64.
    """
    K, _, _ = gram_with_resources(spec, X, Y)
    return K


def gram_with_resources(spec, X, Y=None):
    """:func:`gram`, also returning the resources it built and the symbols indexing them.

    Returns
    -------
    K : ndarray (len(X), len(Y))
    strings : list of str
        The vocabulary (``sym``) the examples were encoded with; resources are indexed by it.
    resources : dict
        ``{resource name: value}`` the kernel read (empty when it reads none).
    """
    spec = as_spec(spec)
    bx, by, vocabs = encode_with_resources(spec, X, Y)
    announce(spec)  # a first run compiles the kernel's Numba cores: say so, once
    K, _, _ = evaluate_block(spec, bx, by)
    mark_compiled(spec)
    names = resource_reps(spec)
    return K, list(vocabs.sym.strings), {n: bx[n] for n in names}


def encode_with_resources(spec, X, Y=None):
    """Encode X (and Y) over one vocabulary and add the resources the spec reads, as :func:`gram` does.

    Returns
    -------
    (bx, by, vocabs): mappings rep name -> Batch (``bx`` also holds the resources; ``by`` is
    None when Y is None) and the :class:`Vocabularies` used.
    """
    spec = as_spec(spec)
    sx = _structures(X)
    sy = None if Y is None else _structures(Y)
    vocabs = Vocabularies()
    needed = set(spec.reps())
    bx, by = {}, None if sy is None else {}
    for name in needed:
        if name not in sx:
            raise KernelSpecError(f"kernel reads representation {name!r}, but the examples have {sorted(sx)}")
        bx[name] = encode(sx[name], vocabs)
        if sy is not None:
            by[name] = encode(sy[name], vocabs)
    # a space built from another representation ('space_rep') has rows for that representation's
    # symbols too, as over a corpus store, whose vocabulary covers every representation
    for name in sorted(set(resource_reps(spec).values()) - needed - {None}):
        if name in sx and (sy is None or name in sy):
            encode(sx[name], vocabs)
            if sy is not None:
                encode(sy[name], vocabs)
    add_resources(spec, bx, vocabs, [sx] if sy is None else [sx, sy])
    return bx, by, vocabs


def add_resources(spec, data, vocabs, structs):
    """Add to ``data`` (rep name -> Batch) the resources the spec's base kernels name and
    ``data`` lacks (e.g. similarity matrices), built from the vocabulary ``vocabs`` the batches
    were encoded with and, for LSA and domain spaces, from ``structs`` (a list of mappings rep
    name -> list of structures; rows then columns) of the representation
    :func:`resource_rep` names (a kernel's ``space_rep``, else the one it reads)."""

    for name, rep in resource_reps(spec).items():
        if name in data:
            continue
        if rep is not None and any(rep not in group for group in structs):
            have = sorted(set.intersection(*(set(group) for group in structs)))
            raise KernelSpecError(f"resource {name!r} is built from representation {rep!r} (the kernel's "
                                  f"'space_rep', else its 'rep'), which the examples lack (they have {have}); "
                                  f"give every example that representation or change space_rep")
        # one builder for in-memory examples and corpus stores (pipeline/resources/build.py)
        data[name] = build_value(name, vocabs.sym.strings, [] if rep is None else
                                 [x for group in structs for x in group[rep]])
