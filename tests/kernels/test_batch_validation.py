"""Malformed batches are refused when built, before any Numba core can read them (the cores
trust their input: an out-of-range pointer or a cycle there reads or loops out of bounds)."""
import numpy as np
import pytest

from gramtile.kernels.batches import Batch
from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.hdag import HDAG
from gramtile.pipeline.representations.vocab import Vocabularies


def tree_batch():
    return encode([parse_tree("(S (NP (D a) (N b)) (VP (V c)))"), parse_tree("(S (NP x) (VP y))")], Vocabularies())


def with_column(b, name, values):
    cols = dict(b.columns)
    cols[name] = np.ascontiguousarray(values, dtype=cols[name].dtype)
    return Batch(b.kind, b.offsets, cols)


def test_a_valid_batch_is_accepted_and_its_gram_computes():
    b = tree_batch()
    K = spec_from_dict({"kind": "sst", "lam": 0.4}).block(b, b)
    assert K.shape == (2, 2) and np.isfinite(K).all()


@pytest.mark.parametrize("case, match", [
    ("offsets_not_from_zero", "start at 0"),
    ("offsets_decrease", "never decrease"),
    ("offsets_past_columns", "entries"),
    ("offsets_int32", "int64"),
    ("missing_column", "columns"),
    ("column_int64", "int32"),
    ("parent_outside", "outside its"),
    ("parent_cycle", "cycle"),
    ("parent_self", "cycle"),
])
def test_malformed_tree_batches_are_refused(case, match):
    b = tree_batch()
    off, cols = b.offsets.copy(), dict(b.columns)
    parent = cols["parent"].copy()
    with pytest.raises(RepresentationError, match=match):
        if case == "offsets_not_from_zero":
            Batch("tree", off + 1, cols)
        elif case == "offsets_decrease":
            Batch("tree", off[::-1].copy(), cols)
        elif case == "offsets_past_columns":
            off[-1] += 5
            Batch("tree", off, cols)
        elif case == "offsets_int32":
            Batch("tree", off.astype(np.int32), cols)
        elif case == "missing_column":
            del cols["prod"]
            Batch("tree", off, cols)
        elif case == "column_int64":
            cols["label"] = cols["label"].astype(np.int64)
            Batch("tree", off, cols)
        elif case == "parent_outside":
            parent[2] = 40
            with_column(b, "parent", parent)
        elif case == "parent_cycle":
            parent[1], parent[2] = 2, 1
            with_column(b, "parent", parent)
        elif case == "parent_self":
            parent[3] = 3
            with_column(b, "parent", parent)


def test_inconsistent_child_arrays_and_non_finite_weights_are_refused():
    b = tree_batch()
    bad_idx = b.child_idx.copy()
    bad_idx[0] = 99
    with pytest.raises(RepresentationError, match="child_idx"):
        Batch("tree", b.offsets, b.columns, b.child_ptr, bad_idx)
    off = np.array([0, 2], dtype=np.int64)
    for w in (np.nan, np.inf):
        with pytest.raises(RepresentationError, match="NaN or infinite"):
            Batch("bag", off, {"feat": np.array([0, 1], dtype=np.int32), "weight": np.array([1.0, w])})


def hdag_batch():
    return encode([HDAG([["a"], ["b"], ["c"]], [-1, -1, -1], [(0, 1), (1, 2)])], Vocabularies())


def test_malformed_hdag_batches_are_refused():
    b = hdag_batch()
    role, a, bb = (b.columns[k].copy() for k in ("role", "a", "b"))
    edges = np.flatnonzero(role == 2)
    cyc = bb.copy()
    cyc[edges[1]] = 0  # 0 -> 1 -> 0
    out = bb.copy()
    out[edges[0]] = 7
    for cols, match in (({"role": role, "a": a, "b": cyc}, "cycle"),
                        ({"role": role, "a": a, "b": out}, "outside"),
                        ({"role": np.where(role == 2, 5, role).astype(np.int32), "a": a, "b": bb}, "role")):
        with pytest.raises(RepresentationError, match=match):
            Batch("hdag", b.offsets, {k: np.ascontiguousarray(v, dtype=np.int32) for k, v in cols.items()})


@pytest.mark.parametrize("name, value", [("label", -1), ("label", -2**31), ("prod", -2), ("prod", -2**31)])
def test_negative_vocabulary_ids_are_refused(name, value):
    # a node left out of every group by a negative label made PT read memo entries never written
    # (NaN or garbage in K, depending on what the memory held: seen with a cold Numba cache)
    b = tree_batch()
    col = b.columns[name].copy()
    col[3] = value
    with pytest.raises(RepresentationError, match=f"column '{name}' holds the id"):
        with_column(b, name, col)
    col[3] = -1 if name == "prod" and b.columns["prod"][3] == -1 else b.columns[name][3]
    with_column(b, name, col)  # the encoder's own ids (-1: a leaf's production) pass
