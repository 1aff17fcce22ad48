"""``gramtile train``: fit a learner (an SVM, the voted perceptron, ...; a regressor, svr or krr;
the preference ranker, rank) and write a model directory.

The training examples come from a corpus store (``--corpus``) or a file (``--input`` with
``--format``; texts are parsed with spaCy). K(train, train) is read from Gram stores
(``--gram``, one per base kernel of the spec; normalised and composite kernels are derived
from them; ``--solver smo`` reads only kernel rows, through a bounded cache) or computed in
memory. The model directory is written once the model is complete (into a temporary directory,
then renamed). The model directory holds the kernel spec, the support
examples (JSON lines), the corpus resources the kernel read (LSA / domain spaces, WordNet
synonymy: with ``--gram`` the corpus store's stored ones, else those built from the training
examples), the dual coefficients and intercepts, the label map (or the task: a regression's or
ranking's one real-valued function) and provenance (see :mod:`gramtile.pipeline.learn.models`);
``gramtile predict --model-dir DIR`` uses it. A regression learns the examples' real targets
(``prepare --target-col``, or ``--targets FILE``); a ranking their targets as relevance (else their
labels read as numbers) within their groups (``prepare --group-col``, or ``--groups FILE``).
"""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun, deprecated, int_at_least_2, overwrite_flag, seed_int
from gramtile.workflows.commands.evaluate import (
    add_learn_options,
    add_linear_options,
    add_model_options,
    add_scratch_option,
    add_task_options,
)
from gramtile.workflows.datainput import add_labels_option, add_table_options


def add_parser(sub):
    p = sub.add_parser("train", help="train a classifier, regressor or ranker and save a model directory",
                       description=__doc__.split("\n\n")[1])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", metavar="CORPUS.zarr", help="corpus store made by `gramtile prepare`")
    src.add_argument("--input", metavar="FILE", help="training file (read with --format; texts are parsed)")
    src.add_argument("--features", metavar="F.zarr",
                     help="a feature store (`gramtile features`): with --model linear, a linear SVM on its rows "
                          "(--linear-solver), saved with what maps new examples onto its features")
    p.add_argument("--format", default="jsonl", help="format of --input (default jsonl)")
    p.add_argument("--kernel", required=False, help="kernel spec JSON or @spec.json (required unless --features)")
    p.add_argument("--out", required=True, metavar="MODEL_DIR", help="model directory to write")
    p.add_argument("--gram", action="append", default=[], metavar="GRAM.zarr",
                   help="reuse a stored K (square, over the corpus's examples; repeat for each base kernel)")
    add_model_options(p, "several values form a grid: the value is chosen by --inner-folds stratified "
                         "cross-validation (plain for a regression, by group for a ranking) on the training "
                         "examples (as evaluate's nested selection chooses it "
                         "inside each training part), the model is fitted on all of them with it, and the choice "
                         "is recorded in the model")
    p.add_argument("--class-weight", default=None, help="none | balanced | LABEL:W,... (default none)")
    p.add_argument("--multiclass", choices=("ovr", "ovo"), default="ovr", help="multi-class scheme (default ovr)")
    p.add_argument("--inner-folds", type=int_at_least_2, default=3, metavar="K",
                   help="folds of the cross-validation that chooses among several --C / --epochs values (default 3)")
    p.add_argument("--fold-seed", type=seed_int, default=0, metavar="S",
                   help="seed of those folds, as evaluate's --fold-seed (default 0)")
    p.add_argument("--normalized", action="store_true",
                   help="use K(x,y)/sqrt(K(x,x)K(y,y)): the same as wrapping --kernel in normalized")
    p.add_argument("--perceptron-seed", type=seed_int, default=None, metavar="S",
                   help="shuffle the perceptron's visiting order with this seed (default: data order)")
    deprecated(p, "--seed", "--perceptron-seed", "perceptron_seed", type=seed_int)
    p.add_argument("--spacy-model", default=None, help="spaCy model for parsing --input texts")
    add_table_options(p, fields=True)
    add_labels_option(p, "the training examples (--input's records, or the corpus store's examples instead of "
                         "its labels)")
    add_task_options(p, "the training examples (--input's records, or the corpus store's examples)")
    add_learn_options(p)
    add_scratch_option(p)
    add_linear_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar over the fits of a grid's selection")
    overwrite_flag(p, "model directory")
    p.set_defaults(func=DeferredRun("train"))
    return p
