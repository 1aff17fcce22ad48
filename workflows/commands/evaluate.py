"""``gramtile evaluate``: k-fold or fixed-split evaluation of any learner of the registry from a Gram
store: classifiers (SVM, voted perceptron, Nystroem linear SVM, ...), regressors (``svr``, ``krr``)
and the preference ranker (``rank``).

Labels come from the corpus store named in the Gram store's provenance (or ``--labels FILE``). The
task follows from the learner (``--task`` for a learner of several kinds): a regression reads the
corpus store's real targets (or ``--targets FILE``), a ranking its targets as relevance (else its
labels read as numbers) and its group ids (or ``--groups FILE``), split by group folds
(:mod:`gramtile.pipeline.learn.tasks`).
``--kernel SPEC`` evaluates a composite (sum, product, normalized, polynomial, weights) of the
base kernels held by the ``--gram`` stores (repeat ``--gram``, one per base kernel; matched by
kernel hash), read from them without recomputing any pair.
k-fold splits are saved as ``folds-k<k>-seed<s>.json`` beside the Gram store (``--folds-dir``)
and reused, so every kernel over one corpus is scored on the same folds. The result table is
printed as markdown; with ``--out DIR`` it is also written to ``results.md`` and
``results.json`` (plus ``learning_curve.png`` with ``--curve``).
"""
from __future__ import annotations

from gramtile.pipeline.learn.choices import (
    LEARNERS,
    LINEAR_LOSSES,
    LINEAR_SOLVERS,
    SGD_CHUNK_ROWS,
    SGD_EPOCHS,
    SVM_SOLVERS,
    TASKS,
    names_for_task,
)
from gramtile.workflows.commands import (
    DeferredRun,
    add_cluster_options,
    add_storage_options,
    deprecated,
    int_at_least_2,
    overwrite_flag,
    positive_int,
    seed_int,
)

SOLVER_HELP = ("SVM solver: libsvm = scikit-learn's SVC on K(train, train) held in memory; smo = exact SVM over kernel "
               "rows read from the store through a bounded cache (--cache-mb), for training blocks beyond memory; "
               "auto (default) = libsvm when K(train, train) plus a test block fit --memory-mb, else smo. The choice "
               "is printed and recorded")
LEARN_CLUSTER_HELP = ("run the independent fits (each split x C, each inner fold x C of nested C selection, each "
                      "one-vs-rest class of --solver smo) as tasks on this cluster.yaml profile: threads, local (Dask "
                      "worker processes), a "
                      "scheduler or slurm profile; each task reads its own blocks from the store. Same results as "
                      "the default sequential (in this process)")


def add_model_options(p, grid_help: str) -> None:
    """--model (the learners, by their cards in :mod:`gramtile.pipeline.learn.choices`) and one option
    per grid parameter the learners declare (comma-separated values; ``grid_help`` says what several
    values do)."""
    p.add_argument("--model", choices=list(LEARNERS), default="svm",
                   help="the learner (default svm): " + "; ".join(f"{n}: {c.summary_line}" for n, c in LEARNERS.items()))
    seen: dict = {}
    for card in LEARNERS.values():
        for prm in card.params:
            seen.setdefault(prm.option, (prm, []))[1].append(card.name)
    for option, (prm, names) in seen.items():
        p.add_argument(option, default=None, metavar=f"{prm.name.upper()}1,...",
                       help=f"{prm.help} ({', '.join(names)}; default {prm.default_text}); {grid_help}")


def add_task_options(p, what: str) -> None:
    """--task, --targets, --groups: what a regression or ranking learns (``what``: the examples)."""
    kinds = "; ".join(f"{t} for {', '.join(names_for_task(t))}" for t in TASKS if names_for_task(t))
    p.add_argument("--task", choices=TASKS, default=None,
                   help=f"the task kind (default: the one the --model learns: {kinds}); needed only for a learner "
                        "of several kinds")
    p.add_argument("--targets", metavar="FILE", default=None,
                   help=f"regression, ranking: one real number per line for {what}, in order, instead of the corpus "
                        "store's targets (prepare --target-col); a ranking without targets ranks by its labels read "
                        "as numbers (0/1)")
    p.add_argument("--groups", metavar="FILE", default=None,
                   help=f"ranking: one group id per line for {what}, in order, instead of the corpus store's groups "
                        "(prepare --group-col); candidates are ranked within their group")


def add_learn_options(p, cluster_default="sequential"):
    """--solver, --cache-mb, --memory-mb, --cluster, --cluster-file of the learning commands."""
    p.add_argument("--solver", choices=SVM_SOLVERS, default="auto", help=SOLVER_HELP)
    p.add_argument("--cache-mb", type=float, default=None, metavar="MB",
                   help="smo: kernel-row cache in MB, as SVM-light's -m, per worker process (the fits running at "
                        "once in one process, the threads of a threads profile, split it; default: a quarter of the "
                        "memory budget per fit, 100 to 4000 MB); a fit's share must hold at least two rows (8 bytes "
                        "x training examples each)")
    p.add_argument("--memory-mb", type=float, default=None, metavar="MB",
                   help="memory budget per process in MB that decides --solver auto (default: on the driver or a "
                        "threads profile, 60%% of the memory available at start, shared by its threads; on Dask "
                        "workers, a worker's memory limit up to where Dask pauses it, less what the worker holds). "
                        "On workers a solver that cannot fit is refused before the run starts")
    if cluster_default is not None:
        add_cluster_options(p, default=cluster_default, help=LEARN_CLUSTER_HELP)
    add_storage_options(p)


def add_scratch_option(p):
    """--scratch of the commands that train smo over Gram stores (evaluate, train)."""
    p.add_argument("--scratch", default=None, metavar="DIR",
                   help="smo: directory on local disk for the kernel row file written when the cache cannot hold "
                        "every training row (8 n^2 bytes for n examples, removed at the end; default: the system's "
                        "temporary directory, TMPDIR)")


def add_linear_options(p):
    """--linear-solver, --sgd-epochs, --sgd-chunk-rows, --rows of the linear learner (--features F.zarr)."""
    p.add_argument("--linear-solver", choices=LINEAR_SOLVERS, default="auto",
                   help="--model linear: liblinear = LinearSVC on the training rows in memory; sgd = SGDClassifier "
                        "(hinge, alpha = 1/(C n)) by partial_fit over chunks of rows read from the store (one chunk "
                        "in memory); auto (default) = liblinear when its estimated peak fits --memory-mb, else sgd")
    p.add_argument("--linear-loss", choices=LINEAR_LOSSES, default="squared_hinge",
                   help="the linear SVM's loss for --model linear with --linear-solver liblinear (LinearSVC) and "
                        "for --model nystroem (dcd): squared_hinge (default) or hinge (the kernel SVC's); sgd always uses the hinge loss")
    p.add_argument("--sgd-epochs", type=positive_int, default=SGD_EPOCHS, metavar="E",
                   help=f"--linear-solver sgd: passes over the training rows (default {SGD_EPOCHS})")
    p.add_argument("--sgd-chunk-rows", type=positive_int, default=SGD_CHUNK_ROWS, metavar="R",
                   help=f"--linear-solver sgd: rows per partial_fit call (default {SGD_CHUNK_ROWS})")
    p.add_argument("--rows", default=None, metavar="A:B",
                   help="--features: learn from feature-store rows A..B-1 only (default all), e.g. 0:50068")


def add_parser(sub):
    p = sub.add_parser("evaluate", help="k-fold / fixed-split evaluation of a classifier, regressor or ranker from "
                                        "a Gram store",
                       description="Train and score a learner (an SVM with a C grid, the voted perceptron, ...; "
                                   "svr / krr regression on the corpus's real targets, scored by Pearson, Spearman "
                                   "and MSE; rank, preference ranking within groups, scored by MAP, MRR, P@1 and "
                                   "nDCG) from a Gram store by k-fold (stratified; by group for a ranking) or a "
                                   "fixed split; print a markdown table and, with --out, write results.md / "
                                   "results.json.")
    p.add_argument("--features", metavar="F.zarr", default=None,
                   help="a feature store (`gramtile features`) instead of --gram: with --model linear, LinearSVC "
                        "one-vs-rest on the explicit features, k-fold; several --C values are selected by nested "
                        "folds (or scored on test with --C-on-test), as for the kernel models")
    p.add_argument("--gram", required=False, action="append", metavar="GRAM.zarr",
                   help="square Gram store over the labelled examples; repeat it for each base kernel of --kernel")
    p.add_argument("--kernel", default=None, metavar="SPEC",
                   help="kernel spec JSON or @spec.json composed from the --gram stores' kernels, e.g. "
                        '\'{"kind": "sum", "kernels": [A, B]}\' (default: the one --gram store\'s own kernel)')
    add_model_options(p, "several values form a grid: the value is chosen inside each training part by "
                         "--inner-folds stratified folds (nested selection) and reported per split, or, with "
                         "--C-on-test, every value is scored on the test parts")
    p.add_argument("--landmark-protocol", choices=("train", "all"), default="train",
                   help="nystroem from a landmark store (gram --landmarks): use the landmarks inside each "
                        "training part (default), or all of them in every split (transductive: test examples "
                        "may be unlabelled landmarks)")
    p.add_argument("--folds", type=int_at_least_2, metavar="K",
                   help="stratified K-fold (default 5 unless --split is given); a regression's are plain K-fold, a "
                        "ranking's keep every group in one fold")
    p.add_argument("--fold-seed", type=seed_int, default=0, metavar="S",
                   help="seed of the k-fold shuffle, of the nested C selection's inner folds and of the Nystroem "
                        "landmarks (default 0); the perceptron's order has its own --perceptron-seed")
    deprecated(p, "--seed", "--fold-seed", "fold_seed", type=seed_int)
    p.add_argument("--split", metavar="train:A:B,test:C:D",
                   help="fixed split by half-open row ranges instead of k-fold")
    p.add_argument("--inner-folds", type=int_at_least_2, default=3, metavar="K",
                   help="folds of the nested C selection inside each training part (default 3)")
    p.add_argument("--C-on-test", action="store_true",
                   help="instead of nested selection, score every C of the grid on the test parts (one row per C; "
                        "the table says so: picking its best row is selection on test data)")
    p.add_argument("--report", action="store_true",
                   help="also print the confusion matrix and per-class precision / recall / F1 of each row")
    p.add_argument("--class-weight", default=None, metavar="balanced|none|LABEL:W,...",
                   help="SVM class weights (default none)")
    p.add_argument("--multiclass", choices=("ovr", "ovo"), default="ovr",
                   help="SVM scheme for more than two classes (default ovr)")
    p.add_argument("--perceptron-seed", type=seed_int, default=None,
                   help="shuffle the perceptron's visiting order with this seed (default: data order; "
                        "use a seed when the data are sorted by label)")
    p.add_argument("--positive", default=None, help="positive class of a binary task (default: +1 / 1 / larger)")
    p.add_argument("--normalized", action="store_true", help="use K(x,y)/sqrt(K(x,x)K(y,y))")
    p.add_argument("--labels", metavar="FILE", help="one label per line for the store's rows, instead of the corpus "
                                                       "(not with --features: a feature store holds its labels)")
    add_task_options(p, "the store's rows")
    p.add_argument("--folds-dir", metavar="DIR", help="where fold files are kept (default: beside the Gram store)")
    p.add_argument("--curve", metavar="F1,F2,...", default=None,
                   help="also a learning curve over these fractions of each training part, e.g. 0.1,0.25,0.5,1; with --out also plotted to learning_curve.png (the plots extra)")
    p.add_argument("--mrr", action="store_true",
                   help="also the same-label neighbour MRR of the whole matrix (reads all of it)")
    p.add_argument("--name", default=None, help="kernel name in the tables (default: the stored spec JSON)")
    p.add_argument("--out", metavar="DIR", help="write results.md and results.json (and plots) here")
    add_learn_options(p)
    add_linear_options(p)
    add_scratch_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar over the fits")
    overwrite_flag(p, "results.md / results.json")
    p.set_defaults(func=DeferredRun("evaluate"))
    return p
