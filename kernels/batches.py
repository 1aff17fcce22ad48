"""Flat CSR batches: the only input the kernel cores ever see.

A batch holds ``n`` examples of one representation kind. ``offsets`` (int64, shape (n+1,))
delimits each example's nodes in the node columns (int32, shape (total_nodes,)). Node indices
inside columns such as ``parent``/``head`` are *local* to their example (0-based, -1 = none).
Children lists are CSR too: ``child_ptr`` (int64, shape (total_nodes+1,)) into ``child_idx``
(int32, local node indices, in order). Strings live in corpus-level vocabularies held by the
pipeline; kernels only compare integer ids. A column whose attribute is absent holds -1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gramtile.kernels.errors import RepresentationError

#: Node columns of each batch kind (besides ``offsets``). Child CSR arrays are handled apart.
KIND_COLUMNS = {
    "tree": ("label", "prod", "parent"),
    "dep": ("word", "lemma", "pos", "deprel", "head"),
    "seq": ("token", "lemma", "pos"),
    "ptree": ("label", "prod", "parent", "position"),
    # WSD instance: a context window's words; ``target`` is 1 at the target word, else 0
    "wsd": ("word", "lemma", "pos", "target"),
    # sparse bag (e.g. KeLP's bag-of-words vector): feature ids (sorted, distinct) and weights
    "bag": ("feat", "weight"),
}

#: Columns stored as float64; every other node column is int32.
FLOAT_COLUMNS = {"weight"}
#: Extra checks of a kind's columns (``validator(batch)`` raises RepresentationError).
KIND_VALIDATORS: dict = {}
#: Columns holding local node indices of the same example (-1 = none).
_POINTER_COLUMNS = ("parent", "head")
#: Smallest id a vocabulary-id column may hold (the cores group nodes by these ids, and a node
#: left out of every group by an unexpected negative id would be read from memory never written).
_ID_FLOORS = {"tree": (("label", 0), ("prod", -1)), "ptree": (("label", 0), ("prod", 0))}


def register_batch_kind(kind: str, columns: tuple, float_columns=(), validator=None):
    """Add a batch kind (used by representations defined in their own modules).

    ``validator(batch)``, if given, checks what the generic batch checks cannot know (e.g. the
    node references of an HDAG's attribute and edge rows) and raises RepresentationError.
    """
    if kind in KIND_COLUMNS and KIND_COLUMNS[kind] != tuple(columns):
        raise ValueError(f"batch kind {kind!r} already registered with columns {KIND_COLUMNS[kind]}")
    KIND_COLUMNS[kind] = tuple(columns)
    FLOAT_COLUMNS.update(float_columns)
    if validator is not None:
        KIND_VALIDATORS[kind] = validator


def _bad(kind: str, what: str):
    raise RepresentationError(f"malformed {kind!r} batch: {what}. Fix: build batches with "
                              f"gramtile.pipeline.representations.encode.encode (or Batch.from_arrays) "
                              f"from valid structures")


def local_pointers_ok(kind: str, name: str, ptr: np.ndarray, offsets: np.ndarray, acyclic: bool):
    """Check a column of local node indices: -1 or inside its example, and (``acyclic``) no cycle."""
    total = ptr.shape[0]
    if total == 0:
        return
    ex = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
    size = np.diff(offsets)[ex]
    p = ptr.astype(np.int64)
    if ((p < -1) | (p >= size)).any():
        i = int(np.flatnonzero((p < -1) | (p >= size))[0])
        _bad(kind, f"column {name!r}: node {i - int(offsets[ex[i]])} of example {int(ex[i])} points to "
                   f"{int(p[i])}, outside its {int(size[i])} nodes")
    if not acyclic:
        return
    glob = np.where(p >= 0, p + offsets[ex], -1)
    jump, steps = glob.copy(), 1
    while steps < int(size.max()) + 1:  # pointer doubling: 2^k >= longest possible path
        jump = np.where(jump >= 0, jump[np.maximum(jump, 0)], -1)
        steps *= 2
    if (jump >= 0).any():
        i = int(np.flatnonzero(jump >= 0)[0])
        _bad(kind, f"column {name!r}: example {int(ex[i])} has a cycle (node {i - int(offsets[ex[i]])} never "
                   f"reaches a root)")


def validate(batch) -> None:
    """Check a batch's arrays once, before any Numba core reads them (the cores trust their input).

    Raises
    ------
    RepresentationError
        Offsets not starting at 0, decreasing or not matching the columns; a missing or extra
        column, a column of the wrong shape or type; a node pointer outside its example or a
        cycle of parents; inconsistent child CSR arrays; a failed check of the kind's validator.
    """
    kind, off = batch.kind, batch.offsets
    if not isinstance(off, np.ndarray) or off.ndim != 1 or off.shape[0] < 1 or off.dtype != np.int64:
        _bad(kind, "offsets must be a 1-d int64 array of n+1 entries")
    if off[0] != 0 or (np.diff(off) < 0).any():
        _bad(kind, "offsets must start at 0 and never decrease")
    total = int(off[-1])
    want = set(KIND_COLUMNS[kind])
    if set(batch.columns) != want:
        _bad(kind, f"columns {sorted(batch.columns)}, expected {sorted(want)}")
    for name, col in batch.columns.items():
        dtype = np.float64 if name in FLOAT_COLUMNS else np.int32
        if not isinstance(col, np.ndarray) or col.ndim != 1 or col.shape[0] != total or col.dtype != dtype:
            _bad(kind, f"column {name!r} must be a 1-d {np.dtype(dtype).name} array of {total} entries "
                       f"(offsets[-1]); got {getattr(col, 'dtype', type(col).__name__)} of shape "
                       f"{getattr(col, 'shape', None)}")
        if not col.flags.c_contiguous:
            _bad(kind, f"column {name!r} is not C-contiguous (use np.ascontiguousarray)")
        if dtype is np.float64 and not np.isfinite(col).all():
            _bad(kind, f"column {name!r} holds NaN or infinite values")
    for name in _POINTER_COLUMNS:
        if name in batch.columns:
            local_pointers_ok(kind, name, batch.columns[name], off, acyclic=True)
    if batch.child_ptr is not None:
        cp, ci = batch.child_ptr, batch.child_idx
        if (not isinstance(cp, np.ndarray) or cp.shape != (total + 1,) or ci is None or cp[0] != 0
                or (np.diff(cp) < 0).any() or int(cp[-1]) != ci.shape[0]):
            _bad(kind, "child_ptr must be int64 of offsets[-1] + 1 entries, from 0, non-decreasing, ending at "
                       "len(child_idx)")
        owner = np.repeat(np.arange(total), np.diff(cp))
        ex = np.repeat(np.arange(off.shape[0] - 1), np.diff(off))
        ci64 = ci.astype(np.int64)
        if ci.shape[0] and ((ci64 < 0) | (ci64 >= np.diff(off)[ex[owner]])).any():
            _bad(kind, "child_idx holds a node index outside its example")
    for name, lo in _ID_FLOORS.get(kind, ()):
        col = batch.columns[name]
        if col.shape[0] and int(col.min()) < lo:
            _bad(kind, f"column {name!r} holds the id {int(col.min())}; its ids are vocabulary ids >= {lo}"
                       + (" (-1: a leaf, no production)" if lo == -1 else ""))
    check = KIND_VALIDATORS.get(kind)
    if check is not None:
        check(batch)


def _children_csr(parent: np.ndarray, offsets: np.ndarray, order_key: np.ndarray | None = None):
    """Build child CSR arrays (local indices) from local parent pointers.

    Children keep increasing node order, or increasing ``order_key`` when given.
    """
    total = parent.shape[0]
    counts = np.zeros(total, dtype=np.int64)
    glob_parent = np.full(total, -1, dtype=np.int64)
    for e in range(offsets.shape[0] - 1):
        a, b = offsets[e], offsets[e + 1]
        p = parent[a:b].astype(np.int64)
        has = p >= 0
        glob_parent[a:b][has] = p[has] + a
    valid = glob_parent >= 0
    np.add.at(counts, glob_parent[valid], 1)
    child_ptr = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(counts, out=child_ptr[1:])
    nodes = np.nonzero(valid)[0]
    key = nodes if order_key is None else order_key[nodes]
    order = np.lexsort((key, glob_parent[nodes]))
    nodes = nodes[order]
    # local index of each child = global - offset of its example
    ex_of = np.searchsorted(offsets, nodes, side="right") - 1
    child_idx = (nodes - offsets[ex_of]).astype(np.int32)
    return child_ptr, child_idx


@dataclass(frozen=True, eq=False)
class Batch:
    """A batch of ``n`` examples of one kind in CSR form (see module docstring)."""

    kind: str
    offsets: np.ndarray
    columns: dict
    child_ptr: np.ndarray | None = None
    child_idx: np.ndarray | None = None

    def __post_init__(self):
        if self.kind not in KIND_COLUMNS:
            raise ValueError(f"unknown batch kind {self.kind!r}; expected one of {sorted(KIND_COLUMNS)}")
        explicit_children = self.child_ptr is not None
        if not explicit_children:
            validate(self)  # before the child CSR is derived from the parent pointers
        if self.child_ptr is None and ("parent" in self.columns or "head" in self.columns):
            parent = self.columns.get("parent", self.columns.get("head"))
            key = self.columns.get("position")
            cp, ci = _children_csr(parent, self.offsets, key)
            object.__setattr__(self, "child_ptr", cp)
            object.__setattr__(self, "child_idx", ci)
        if explicit_children:
            validate(self)

    @staticmethod
    def of_valid(kind: str, offsets, columns, child_ptr=None, child_idx=None) -> Batch:
        """A batch made from the arrays of batches already validated (whole examples taken,
        reordered or concatenated, views made read-only): built without running :func:`validate`
        again, since it runs for every tile and block the cores get. The child CSR is derived as
        in the constructor when not given."""
        out = object.__new__(Batch)
        if child_ptr is None and ("parent" in columns or "head" in columns):
            child_ptr, child_idx = _children_csr(columns.get("parent", columns.get("head")), offsets,
                                                 columns.get("position"))
        for name, value in (("kind", kind), ("offsets", offsets), ("columns", columns),
                            ("child_ptr", child_ptr), ("child_idx", child_idx)):
            object.__setattr__(out, name, value)
        return out

    @property
    def n(self) -> int:
        return int(self.offsets.shape[0] - 1)

    def __len__(self) -> int:
        return self.n

    def sizes(self) -> np.ndarray:
        """Number of nodes (tokens) per example, shape (n,)."""
        return np.diff(self.offsets)

    def take(self, idx) -> Batch:
        """A new batch with the examples ``idx`` (any integer index array), in that order."""
        idx = np.asarray(idx, dtype=np.int64)
        starts, stops = self.offsets[idx], self.offsets[idx + 1]
        lens = stops - starts
        new_off = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lens, out=new_off[1:])
        # node positions of the examples taken, in order: one arange shifted per example
        gather = np.arange(int(new_off[-1]), dtype=np.int64) + np.repeat(starts - new_off[:-1], lens)
        cols = {k: np.ascontiguousarray(v[gather]) for k, v in self.columns.items()}
        return Batch.of_valid(self.kind, new_off, cols)  # whole examples of a validated batch

    def slice(self, start: int, stop: int) -> Batch:
        """Examples ``start:stop`` as a new batch (node arrays are copied, contiguous)."""
        return self.take(np.arange(start, stop))

    @staticmethod
    def concat(batches) -> Batch:
        batches = list(batches)
        if not batches:
            raise ValueError("concat needs at least one batch")
        kind = batches[0].kind
        offs = [np.zeros(1, dtype=np.int64)]
        base = 0
        for b in batches:
            if b.kind != kind:
                raise ValueError(f"cannot concatenate batches of kinds {kind!r} and {b.kind!r}")
            offs.append(b.offsets[1:] + base)
            base += int(b.offsets[-1])
        cols = {k: np.concatenate([b.columns[k] for b in batches]) for k in batches[0].columns}
        return Batch.of_valid(kind, np.concatenate(offs), cols)  # validated batches, end to end

    def readonly(self) -> Batch:
        """This batch with read-only views of its arrays (no copy).

        Numba compiles a core once per argument signature, and an array's read-only flag is part
        of it: batches from a corpus store's shard cache are read-only, freshly encoded or
        concatenated ones are not, so handing the cores either kind compiled every core twice
        (17 s more for the tree kernels; bench/compile_times.py). The cores get only read-only
        batches (``pipeline/compute/inmemory.batch_for``).
        """

        def ro(a):
            if a is None or not a.flags.writeable:
                return a
            v = a.view()
            v.flags.writeable = False
            return v

        return Batch.of_valid(self.kind, ro(self.offsets), {k: ro(v) for k, v in self.columns.items()},
                              ro(self.child_ptr), ro(self.child_idx))

    def arrays(self) -> dict:
        """All arrays by name (``offsets`` and the node columns), for storage."""
        out = {"offsets": self.offsets}
        out.update(self.columns)
        return out

    @staticmethod
    def from_arrays(kind: str, arrays: dict) -> Batch:
        cols = {k: np.ascontiguousarray(arrays[k], dtype=np.float64 if k in FLOAT_COLUMNS else np.int32)
                for k in KIND_COLUMNS[kind]}
        return Batch(kind, np.ascontiguousarray(arrays["offsets"], dtype=np.int64), cols)
