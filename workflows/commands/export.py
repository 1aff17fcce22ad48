"""``gramtile export``: write a complete Gram store's K (or a selection of it) to .npy or to
LIBSVM / SVM-light text files, with the ids and labels beside it.

Formats:

- npy: an array of shape (rows, cols) in the store's dtype (float64, or float32 for a
  --dtype float32 store);
- libsvm: LIBSVM's precomputed-kernel format, one line per row
  "label 0:i 1:K(i,1) ... m:K(i,m)" (i = the row's 1-based serial number), for
  svm-train -t 4 (train with --rows = --cols = the training positions, predict with
  --rows = test positions and --cols = the training positions);
- svmlight: the same without the "0:i" serial, so scikit-learn's load_svmlight_file reads
  exactly K[rows][:, cols] (for SVC(kernel="precomputed")).

Beside OUT: OUT.rows.tsv (position, corpus index, id, label), OUT.cols.tsv when the columns
are not the rows, and OUT.classes.tsv (number -> label) when text labels were numbered for a
text format. Selections (--rows/--cols) are positions in the store's own rows/columns:
all | a:b | @file.txt (one position per line).
"""
from __future__ import annotations

import argparse

from gramtile.pipeline.stores.choices import EXPORT_FORMATS
from gramtile.workflows.commands import DeferredRun, add_storage_options, overwrite_flag


def add_parser(sub):
    p = sub.add_parser("export", help="write K of a complete Gram store (or a selection) to .npy, LIBSVM or SVM-light",
                       description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", help="Gram store (GRAM.zarr)")
    add_storage_options(p)
    p.add_argument("--out", required=True, help="output file")
    p.add_argument("--format", default="npy", choices=EXPORT_FORMATS, help="output format (default npy)")
    p.add_argument("--rows", default=None, help="row positions: all | a:b | @file.txt (default all)")
    p.add_argument("--cols", default=None, help="column positions (default: the rows of a symmetric store, "
                                                "else all columns)")
    p.add_argument("--normalized", action="store_true", help="write K(x,y)/sqrt(K(x,x)K(y,y))")
    p.add_argument("--labels", metavar="FILE", default=None,
                   help="one label per line for the store's rows, in row order, instead of the corpus store's")
    overwrite_flag(p, "output file")
    p.set_defaults(func=DeferredRun("export"))
    return p
