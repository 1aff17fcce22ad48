"""Writing a Gram store's matrix out: .npy, LIBSVM's precomputed-kernel format and svmlight, with
the ids and labels beside it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gramtile.pipeline.readers.base import tsv_field
from gramtile.pipeline.stores.choices import EXPORT_FORMATS
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.gram_format import (
    write_npy_header,
)
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_view import positions


def export(store, out_npy, normalized: bool = False):
    """Write a complete store's K (optionally normalized) to ``out_npy``; see :meth:`GramView.export`."""
    st = store if isinstance(store, GramStore) else GramStore.open(store)
    return st.view().export(out_npy, normalized=normalized)


def numeric_labels(labels) -> tuple:
    """LIBSVM labels are numbers: (codes, mapping). Labels that all read as numbers are kept
    (mapping None); otherwise label ``sorted(set(labels))[k]`` is written as ``k``."""
    try:
        vals = [float(str(y)) for y in labels]
        if all(np.isfinite(vals)):
            return [str(y).strip() for y in labels], None
    except ValueError:
        pass
    classes = sorted({str(y) for y in labels})
    code = {c: k for k, c in enumerate(classes)}
    return [str(code[str(y)]) for y in labels], classes


def export_selection(store, out, fmt: str = "npy", rows=None, cols=None, normalized: bool = False,
                     labels=None) -> list:
    """Write ``K[rows][:, cols]`` of a store in one of :data:`EXPORT_FORMATS`, plus the ids and labels beside it.

    - ``npy``: a .npy of shape (len(rows), len(cols)) in the store's dtype (float64 or float32);
    - ``libsvm``: LIBSVM's precomputed-kernel format (``svm-train -t 4``), one line per row
      ``label 0:i 1:K(r,c_1) ... m:K(r,c_m)`` with ``i`` the row's 1-based serial number in the
      row selection (LIBSVM needs it equal to the training example's number when rows are the
      training columns; for test rows it is ignored); every value is written, zeros included;
    - ``svmlight``: the same rows without the ``0:i`` serial, features 1..m, so
      ``sklearn.datasets.load_svmlight_file(f)[0]`` is exactly K[rows][:, cols] (for
      ``SVC(kernel="precomputed")``).

    Values are written with 17 significant digits (they read back bitwise; a float32 store's
    values read back as the same float32 numbers, widened). Beside ``out``:
    ``OUT.rows.tsv`` (position in the store, corpus index, id, label) and, when the columns
    differ from the rows, ``OUT.cols.tsv``; with text labels in a text format also
    ``OUT.classes.tsv`` (number written -> label). ``rows``/``cols`` are positions in the
    store's own row/column selection (None: all). Returns the paths written.

    Raises
    ------
    StoreError
        Unknown format; labels unavailable for a text format.
    IncompleteTileError
        A needed tile is not computed.
    """
    if fmt not in EXPORT_FORMATS:
        raise StoreError(f"export format {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
    st = store if isinstance(store, GramStore) else GramStore.open(store)
    v = st.view()
    nr, nc = st.shape
    r = positions(rows, nr, "row")
    same = cols is None and st.symmetric and rows is not None
    c = r if same else positions(cols, nc, "column")
    out = Path(out)
    if labels is None:
        try:
            all_labels = st.labels("row")
        except StoreError as e:
            if fmt != "npy":
                raise StoreError(f"the {fmt} format needs one label per row: {e}") from None
            all_labels = None
        row_labels = None if all_labels is None else [all_labels[i] for i in r]
    else:
        labels = list(labels)
        if len(labels) != nr:
            raise StoreError(f"{len(labels)} labels given for a store of {nr} rows; give one per row, in row order")
        row_labels = [labels[i] for i in r]
    ids_r = st.ids("row")
    written = []
    tmp = out.with_name(out.name + ".partial")
    try:
        t = st.tile
        if fmt == "npy":
            with open(tmp, "wb") as f:  # written in order, no memory map: a full disk is an OSError here
                write_npy_header(f, st.dtype, (r.size, c.size))
                for k in range(0, r.size, t):
                    blk = np.ascontiguousarray(v.block(r[k:k + t], c, normalized=normalized), dtype=st.dtype)
                    f.write(memoryview(blk).cast("B"))
        else:
            codes, classes = numeric_labels(row_labels)
            first = 1 if fmt == "libsvm" else 0
            with open(tmp, "w", encoding="ascii") as f:
                for k in range(0, r.size, t):
                    blk = v.block(r[k:k + t], c, normalized=normalized)
                    for i, row in enumerate(blk):
                        head = f"{codes[k + i]} 0:{k + i + 1} " if first else f"{codes[k + i]} "
                        f.write(head + " ".join(f"{j}:{x:.17g}" for j, x in enumerate(row, 1)) + "\n")
            if classes is not None:
                cl = out.with_name(out.name + ".classes.tsv")
                cl.write_text("code\tlabel\n" + "".join(f"{k}\t{tsv_field(lab)}\n" for k, lab in enumerate(classes)),
                              encoding="utf-8")
                written.append(cl)
        tmp.replace(out)
    finally:
        if tmp.exists():
            tmp.unlink()
    written.insert(0, out)
    idx_r = st.rows()
    side = out.with_name(out.name + ".rows.tsv")
    side.write_text("position\tcorpus_index\tid\tlabel\n" + "".join(
        f"{p}\t{idx_r[p]}\t{tsv_field(ids_r[p])}\t{'' if row_labels is None else tsv_field(row_labels[k])}\n"
        for k, p in enumerate(r)),
        encoding="utf-8")
    written.append(side)
    if not (same or (cols is None and rows is None and st.symmetric)):
        ids_c, idx_c = st.ids("col"), (st.rows() if st.symmetric else st.cols())
        side = out.with_name(out.name + ".cols.tsv")
        side.write_text("position\tcorpus_index\tid\n" + "".join(
            f"{p}\t{idx_c[p]}\t{tsv_field(ids_c[p])}\n" for p in c), encoding="utf-8")
        written.append(side)
    return written
