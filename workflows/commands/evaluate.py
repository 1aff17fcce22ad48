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

import json
import math
import time
from pathlib import Path

import numpy as np

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.crossval import parse_class_weight
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import (
    folds_path,
    group_kfold,
    load_or_make_folds,
    parse_split,
    stratified_kfold,
)
from gramtile.pipeline.learn.learners.base import TASKS, option_dest
from gramtile.pipeline.learn.learners.linear import FeatureData
from gramtile.pipeline.learn.learners.registry import LEARNERS, names_for_task
from gramtile.pipeline.learn.linear import CHUNK_ROWS, EPOCHS, LOSSES
from gramtile.pipeline.learn.linear import SOLVERS as LINEAR_SOLVERS
from gramtile.pipeline.learn.nystroem import LandmarkSource
from gramtile.pipeline.learn.report import (
    SCORE_COLUMNS,
    markdown_table,
    plot_learning_curve,
    report_tables,
    task_columns,
)
from gramtile.pipeline.learn.solver import SOLVERS
from gramtile.pipeline.learn.sources import ViewKernelSource, open_gram_source, read_labels, store_labels
from gramtile.pipeline.learn.tasks import task_of, task_targets
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.gram_store import ComposedView, GramStore
from gramtile.pipeline.stores.storage import refuse_url
from gramtile.workflows.commands import (
    add_cluster_options,
    add_storage_options,
    check_output_dir,
    deprecated,
    int_at_least_2,
    overwrite_flag,
    positive_int,
    runtime,
    seed_int,
    write_text_atomic,
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
    """--model (the registry's learners) and one option per grid parameter the learners declare
    (comma-separated values; ``grid_help`` says what several values do)."""
    p.add_argument("--model", choices=list(LEARNERS), default="svm",
                   help="the learner (default svm): " + "; ".join(f"{n}: {c.summary_line}" for n, c in LEARNERS.items()))
    seen: dict = {}
    for cls in LEARNERS.values():
        for prm in cls.params:
            seen.setdefault(prm.option, (prm, []))[1].append(cls.name)
    for option, (prm, names) in seen.items():
        p.add_argument(option, default=None, metavar=f"{prm.name.upper()}1,...",
                       help=f"{prm.help} ({', '.join(names)}; default {prm.text(prm.default)}); {grid_help}")


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
    p.add_argument("--solver", choices=SOLVERS, default="auto", help=SOLVER_HELP)
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
    p.add_argument("--linear-loss", choices=LOSSES, default="squared_hinge",
                   help="the linear SVM's loss for --model linear with --linear-solver liblinear (LinearSVC) and "
                        "for --model nystroem (dcd): squared_hinge (default) or hinge (the kernel SVC's); sgd always uses the hinge loss")
    p.add_argument("--sgd-epochs", type=positive_int, default=EPOCHS, metavar="E",
                   help=f"--linear-solver sgd: passes over the training rows (default {EPOCHS})")
    p.add_argument("--sgd-chunk-rows", type=positive_int, default=CHUNK_ROWS, metavar="R",
                   help=f"--linear-solver sgd: rows per partial_fit call (default {CHUNK_ROWS})")
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
                   help="also a learning curve over these fractions of each training part, e.g. 0.1,0.25,0.5,1")
    p.add_argument("--mrr", action="store_true",
                   help="also the same-label neighbour MRR of the whole matrix (reads all of it)")
    p.add_argument("--name", default=None, help="kernel name in the tables (default: the stored spec JSON)")
    p.add_argument("--out", metavar="DIR", help="write results.md and results.json (and plots) here")
    add_learn_options(p)
    add_linear_options(p)
    add_scratch_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar over the fits")
    overwrite_flag(p, "results.md / results.json")
    p.set_defaults(func=run)
    return p


def _floats(text, what):
    try:
        vals = [float(t) for t in str(text).split(",") if t.strip()]
    except ValueError:
        raise EvaluationError(f"{what} {text!r} is not a comma-separated list of numbers; e.g. {what} 0.1,1,10") \
            from None
    if not all(math.isfinite(v) for v in vals):
        raise EvaluationError(f"{what} {text!r} holds a value that is not a finite number; e.g. {what} 0.1,1,10")
    if not vals:
        raise EvaluationError(f"{what} {text!r} is empty; give at least one number")
    return vals


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item"):
        return v.item()
    return v


def spec_name(d) -> str:
    """A short readable name of a kernel spec dict: ``normalized(sst(lam=0.4, leaves=false))``; the
    terms of a sum or product are listed by name, a weighted term as ``0.5*name``
    (``sum(0.5*normalized(sst(lam=0.4)), 2*normalized(st(lam=0.4)))``).

    The representation (``rep``) is left out; the full spec stays in results.json.
    """
    if not isinstance(d, dict):
        return json.dumps(d) if isinstance(d, bool) else str(d)
    if "kind" not in d and "kernel" in d:  # a weighted term of a sum
        w = d.get("weight", 1.0)
        return (f"{w:g}*" if w != 1.0 else "") + spec_name(d["kernel"])
    parts = []
    for k, v in d.items():
        if k in ("kind", "rep"):
            continue
        if isinstance(v, dict):
            parts.append(spec_name(v))
        elif isinstance(v, list) and k == "kernels":
            parts.extend(spec_name(x) for x in v)
        elif isinstance(v, list):
            parts.append(f"{k}=[" + ", ".join(spec_name(x) for x in v) + "]")
        else:
            parts.append(f"{k}={spec_name(v)}")
    return f"{d.get('kind', 'kernel')}(" + ", ".join(parts) + ")" if parts else str(d.get("kind", "kernel"))


def _sorted_by_label(labels, splits) -> bool:
    """True when some split's training labels, in visiting order, form one run per class."""
    for sp in splits:
        y = [labels[i] for i in sp.train]
        switches = sum(a != b for a, b in zip(y, y[1:]))
        if switches < len(set(y)):
            return True
    return False


def _source(args, learner):
    """(kernel source, the first Gram store, the full kernel spec dict, normalisation included)."""
    if args.kernel is None:
        if len(args.gram) > 1:
            raise EvaluationError(f"{len(args.gram)} --gram stores but no --kernel: say how to combine them, e.g. "
                                  '--kernel \'{"kind": "sum", "kernels": [A, B]}\' with A, B their kernels')
        st = GramStore.open(args.gram[0])
        if st.landmarks is not None:  # a landmark store (gram --landmarks): Nystroem only
            if learner.reads != "landmarks":
                raise EvaluationError(f"Gram store {st.path} is a landmark store (K(rows, landmarks), made by gram "
                                      f"--landmarks); it serves --model nystroem only, or compute a square store")
            source = LandmarkSource(st, normalized=args.normalized)
        else:
            source = open_gram_source(args.gram[0], normalized=args.normalized)
        kernel = source.store.meta.get("kernel") or {"kind": "kernel"}
        if args.normalized:
            kernel = {"kind": "normalized", "kernel": kernel}
        return source, source.store, kernel
    spec = as_spec(args.kernel)
    if args.normalized:
        spec = as_spec({"kind": "normalized", "kernel": spec.to_dict()})
    stores = [GramStore.open(g) for g in args.gram]
    for st in stores:
        if not st.symmetric:
            raise EvaluationError(f"Gram store {st.path} is rectangular; evaluation needs square stores over the "
                                  "labelled examples (gramtile gram without --cols)")
    view = ComposedView(spec, stores)
    used = next(iter(view.views.values())).store
    return ViewKernelSource(view), used, spec.to_dict()


def learner_of(args):
    """The learner of ``--model`` configured from the command line, and its grid."""
    cls = LEARNERS[args.model]
    for other in LEARNERS.values():
        for p in other.params:
            if getattr(args, option_dest(p.option), None) is not None and p.name not in {q.name for q in cls.params}:
                raise EvaluationError(f"--model {args.model} takes no {p.option} ({p.help} of --model "
                                      f"{other.name}); its parameters are "
                                      f"{', '.join(q.option for q in cls.params)}")
    return cls.from_args(args), cls.grid_from_args(args)


def _data(args, learner):
    """(data source, labels, where they came from, the Gram store or None, the kernel spec dict)."""
    if learner.reads == "features":
        if not args.features or args.gram:
            raise EvaluationError(f"--model {learner.name} reads a feature store: give --features F.zarr (written by "
                                  "`gramtile features`) and no --gram")
        if args.labels:
            raise EvaluationError("--labels is not read with --features: a feature store holds its examples' labels "
                                  "(checked by their sha256). Fix: drop --labels, or prepare the corpus with --labels "
                                  "FILE and write its feature store with `gramtile features`")
        data = FeatureData.open(args.features, args.rows)
        return data, data.labels, f"feature store {args.features}", None, data.store.meta["spec"]
    if args.features:
        raise EvaluationError(f"--features F.zarr goes with --model linear; --model {learner.name} reads Gram stores "
                              "(--gram)")
    if not args.gram:
        raise EvaluationError("--gram GRAM.zarr is required (or --features F.zarr with --model linear)")
    if args.rows:
        raise EvaluationError("--rows selects feature-store rows (--features); a Gram store's examples are chosen by "
                              "--split or --folds")
    source, store, kernel_dict = _source(args, learner)
    if args.labels:
        labels, label_source = read_labels(args.labels, source.n), str(args.labels)
    else:
        labels, label_source = _class_labels(store, learner), f"corpus store {store.meta.get('corpus_path')}"
    return source, labels, label_source, store, kernel_dict


def _class_labels(store, learner) -> list:
    """The labels of the store's rows; a corpus of real targets without labels is refused naming the
    learners of its targets."""
    try:
        return store_labels(store)
    except EvaluationError:
        cs = store.corpus_store("pass --labels FILE with the labels of the store's rows")
        if cs.targets is not None:
            raise EvaluationError(f"corpus store {store.meta.get('corpus_path')} holds real targets and no class "
                                  f"labels, and --model {learner.name} learns classification; use --model svr or krr "
                                  "(regression) or rank (ranking), or give --labels FILE") from None
        raise


def _task_data(args, task, learner):
    """(kernel source, real targets, group ids or None, where the targets came from, the Gram store,
    the kernel spec dict) of a regression or ranking."""
    if args.features or learner.reads != "kernel":
        raise EvaluationError(f"a {task} reads a square kernel: give --gram (and --kernel), not --features")
    if not args.gram:
        raise EvaluationError(f"--gram GRAM.zarr is required: a {task} learns from a square Gram store")
    if args.rows:
        raise EvaluationError("--rows selects feature-store rows (--features); a Gram store's examples are chosen by "
                              "--split or --folds")
    if args.labels and (task == "regression" or args.targets):
        raise EvaluationError(f"--labels gives class labels, which a {task} with targets does not read; give the "
                              "targets with --targets FILE (one number per line), or drop --labels")
    source, store, kernel_dict = _source(args, learner)
    where = f"corpus store {store.meta.get('corpus_path')}"
    targets = labels = groups = None
    if not args.targets or (task == "ranking" and not args.groups):
        cs = store.corpus_store("give --targets FILE (and, for a ranking, --groups FILE) for the store's rows")
        rows = store.rows()
        targets = None if cs.targets is None else cs.targets[rows]
        groups = None if cs.groups is None else cs.groups[rows]
        if task == "ranking" and targets is None and not args.targets:
            labels = read_labels(args.labels, source.n) if args.labels else [cs.labels[i] for i in rows]
    y, groups, y_from = task_targets(task, source.n, where, targets=targets, labels=labels, groups=groups,
                                     targets_file=args.targets, groups_file=args.groups,
                                     labels_from=f"labels file {args.labels}" if args.labels else None)
    return source, y, groups, y_from, store, kernel_dict


def _splits(args, labels, n, store, task="classification", groups=None):
    """The splits and how they were made."""
    if args.split and task != "classification":
        sp = parse_split(args.split, n)
        both = np.intersect1d(np.asarray(groups)[sp.train], np.asarray(groups)[sp.test]) if task == "ranking" else ()
        if len(both):
            raise EvaluationError(f"--split {args.split} divides group {both[0]!r} between the training and the test "
                                  "part, and a ranking keeps each group whole; split at a group boundary, or use "
                                  "--folds K (folds by group)")
        return [sp], f"fixed split {args.split}"
    if task != "classification":
        k = 5 if args.folds is None else args.folds
        if task == "ranking":  # every group in one fold
            return group_kfold(groups, k, args.fold_seed), f"{k}-fold by group (seed {args.fold_seed})"
        return group_kfold(np.arange(n), k, args.fold_seed), f"{k}-fold (seed {args.fold_seed})"
    if args.split:
        if store is None:
            raise EvaluationError("--split is not available with --features; use --folds K (and --rows A:B)")
        return [parse_split(args.split, n)], f"fixed split {args.split}"
    k = 5 if args.folds is None else args.folds
    if store is None and not args.folds_dir:
        return stratified_kfold(labels, k, args.fold_seed), f"{k}-fold (seed {args.fold_seed})"
    if not args.folds_dir:
        refuse_url(store.loc.path, "fold files kept beside the Gram store", "pass --folds-dir DIR (a local directory)")
    folds_dir = Path(args.folds_dir) if args.folds_dir else Path(store.path).resolve().parent
    splits = load_or_make_folds(folds_dir, labels, k, args.fold_seed)
    return splits, f"{k}-fold (seed {args.fold_seed}; {folds_path(folds_dir, k, args.fold_seed, labels)})"


def check_task_options(args, task: str) -> None:
    """Refuse the options a task kind does not read (one line naming the fix)."""
    if task == "classification":
        for opt, dest in (("--targets", "targets"), ("--groups", "groups")):
            if getattr(args, dest, None):
                others = names_for_task("regression") + names_for_task("ranking")
                raise EvaluationError(f"{opt} is read by a regression or ranking; --model {args.model} learns "
                                      f"classification. Drop it, or use --model {', '.join(others)}")
        return
    if task == "regression" and getattr(args, "groups", None):
        raise EvaluationError("--groups is read by a ranking (--model rank); a regression has no groups. Drop it")
    if getattr(args, "multiclass", "ovr") != "ovr":
        raise EvaluationError(f"--multiclass {args.multiclass} belongs to a classification of several classes, and "
                              f"this is a {task} task; drop --multiclass")
    for opt, dest in (("--curve", "curve"), ("--report", "report"), ("--mrr", "mrr"), ("--positive", "positive"),
                      ("--class-weight", "class_weight"), ("--folds-dir", "folds_dir")):
        if getattr(args, dest, None):
            what = ("fold files of stratified folds; a regression's or ranking's folds are made again from "
                    "--fold-seed" if dest == "folds_dir" else "a classification")
            raise EvaluationError(f"{opt} belongs to {what}, and this is a {task} task; drop {opt}")


def run(args) -> int:
    """k-fold (or fixed split) evaluation of any learner of the registry."""
    if args.split and args.folds is not None:
        raise EvaluationError("give either --folds K or --split train:A:B,test:C:D, not both")
    learner, grid_args = learner_of(args)
    task = task_of(learner, args.task)
    class_weight = parse_class_weight(args.class_weight)  # bad values fail before any work (fold files included)
    if task == "classification":
        learner.check_capabilities(args.multiclass, class_weight)
    check_task_options(args, task)
    points = learner.grid(grid_args)
    varying = learner.varying(points)
    if args.curve is not None and any(not 0 < f <= 1 for f in _floats(args.curve, "--curve")):
        raise EvaluationError(f"--curve {args.curve!r}: learning-curve fractions must lie in (0, 1]; "
                              "e.g. --curve 0.1,0.25,0.5,1")
    several = bool(varying)
    if several and not args.C_on_test and args.curve:
        raise EvaluationError(f"--curve with several values of {', '.join(varying)} would choose them on the test "
                              "parts; give one value each, or add --C-on-test")
    if args.mrr and learner.reads == "features":
        raise EvaluationError("--mrr reads a square kernel (--gram); a feature store has none")
    if args.out:
        check_output_dir(args.out, "--out", args.overwrite, owned=("results.json", "results.md"))
    with runtime(args) as rt:  # one cluster for every fit of the command, closed at its end
        groups = None
        if task == "classification":
            source, labels, label_source, store, kernel_dict = _data(args, learner)
        else:
            source, labels, groups, label_source, store, kernel_dict = _task_data(args, task, learner)
        name = args.name or spec_name(kernel_dict)
        splits, how = _splits(args, labels, source.n, store, task, groups)
        what = ", ".join(map(str, args.gram)) if store is not None else str(args.features)
        log.info(f"evaluate {what}: {source.n} examples, {how}, "
                 f"{'labels' if task == 'classification' else 'targets'} from {label_source}")
        if learner.name == "perceptron" and args.perceptron_seed is None and _sorted_by_label(labels, splits):
            log.warning("  note: a training part is ordered by label (e.g. all negatives, then all positives); the "
                        "perceptron visits it in that order and learns little from it. Add --perceptron-seed 0 to "
                        "shuffle the visiting order")
        problem = dict(kernel=name, positive=args.positive, class_weight=class_weight, multiclass=args.multiclass,
                       cluster=rt)
        t_learn = time.perf_counter()
        real = {} if task == "classification" else {"task": task, "groups": groups}
        ev = selection.evaluate(learner, source, labels, splits, points, seed=args.perceptron_seed,
                                select="test" if args.C_on_test else "nested", inner_folds=args.inner_folds,
                                inner_seed=args.fold_seed, **problem, **real)
        t_learn = time.perf_counter() - t_learn
        names = " and ".join(varying)
        grid_text = "; ".join((f"{p} " if len(varying) > 1 else "")
                              + ",".join(learner.param(p).text(v) for v in dict.fromkeys(pt[p] for pt in points))
                              for p in varying)
        if several and args.C_on_test:
            header = (f"{names} chosen on test (--C-on-test): every {names} below is scored on the test parts, so "
                      "picking the best row is selection on test data and its score is optimistic.")
        elif several:
            header = (f"{names} selected by nested {args.inner_folds}-fold cross-validation inside each training part "
                      f"(grid {grid_text}); {', '.join(p + '_chosen' for p in varying)} lists the {names} chosen per "
                      "split; no test example took part in choosing it.")
        else:
            header = None
        params = [p.name for p in learner.params]
        general = () if task == "classification" else (*params, *(f"{p}_chosen" for p in params))
        table = markdown_table(ev.rows) if task == "classification" else \
            markdown_table(ev.rows, columns=task_columns(ev.rows, params, task), general=general)
        if header:
            print(header + "\n")
        print(table)
        if args.report:
            for key, rep in ev.reports.items():
                print(f"\n{key}: confusion matrix (rows = truth) and per-class scores, pooled over the test parts\n")
                print(report_tables(rep))
        sources = {"gram": [str(g) for g in args.gram]} if store is not None else {"features": str(args.features),
                                                                                   "rows": args.rows}
        out = {**sources, "kernel": kernel_dict, "normalized": bool(args.normalized), "model": learner.name,
               "selection": "test" if (several and args.C_on_test) else "nested" if several else "single",
               "C_selection": "test" if (several and args.C_on_test) else "nested" if several else "single",
               **({"labels": label_source} if task == "classification" else
                  {"task": task, "targets": label_source,
                   **({"groups": f"groups file {args.groups}" if args.groups else
                       f"the groups of corpus store {store.meta.get('corpus_path')}"} if task == "ranking" else {})}),
               "splits": how, "rows": ev.rows, "fold_rows": ev.fold_rows,
               "reports": ev.reports, "predictions": {},
               **({"solver": ev.solver} if ev.solver else {}),
               # the learning phase's wall time (every fit, from reading the blocks to the pooled scores)
               "timing": {"learn_seconds": round(t_learn, 3)}}
        ids = store.meta.get("row_ids") if store is not None else None
        for key, (idx, pred) in ev.predictions.items():
            out["predictions"][key] = {"row": idx.tolist(), "predicted": pred.tolist(),
                                       "gold": [labels[i] for i in idx],
                                       **({"group": [groups[i] for i in idx]} if groups is not None else {}),
                                       **({"id": [ids[i] for i in idx]} if ids else {})}
        md = [f"# gramtile evaluate\n\n{what}, kernel `{name}`, model {learner.name}, {source.n} examples, {how}.\n",
              "## Overall (pooled predictions)\n"] + ([header + "\n"] if header else []) + [table]
        if args.report:
            for key, rep in ev.reports.items():
                md += [f"\n### {key}: confusion matrix (rows = truth) and per-class scores\n", report_tables(rep)]
        if ev.fold_rows:
            cols = ["model", *[p.name for p in learner.params], *[p + "_chosen" for p in varying], "split", "n_train",
                    "n_test", *SCORE_COLUMNS[task]]
            md += ["\n## Per split\n", markdown_table(
                ev.fold_rows, columns=[c for c in dict.fromkeys(cols) if any(c in r for r in ev.fold_rows)],
                general=general)]
        if args.curve:
            # the fold seed also fixes which nested training subsets the curve uses
            rows = selection.learning_curve(learner, source, labels, splits, _floats(args.curve, "--curve"), points,
                                            seed=args.fold_seed, problem_seed=args.perceptron_seed, **problem)
            print("\nLearning curve\n" + markdown_table(rows))
            out["curve"] = rows
            md += ["\n## Learning curve\n", markdown_table(rows)]
            if args.out:
                Path(args.out).mkdir(parents=True, exist_ok=True)
                png = Path(args.out) / "learning_curve.png"
                plot_learning_curve(rows, png, title=f"learning curve: {learner.name}")
                md.append(f"\n![learning curve]({png.name})\n")
        if args.mrr:
            mrr = selection.source_mrr(source, labels, block_rows=int(store.tile))
            print(f"\nsame-label neighbour MRR (pessimistic ties): {mrr:.4f}")
            out["neighbour_mrr"] = mrr
            md.append(f"\nSame-label neighbour MRR (pessimistic ties): {mrr:.4f}\n")
        if args.out:
            d = Path(args.out)
            d.mkdir(parents=True, exist_ok=True)
            write_text_atomic(d / "results.json", json.dumps(_jsonable(out), indent=1))
            write_text_atomic(d / "results.md", "\n".join(md) + "\n")
            log.info(f"wrote {d / 'results.md'} and {d / 'results.json'}")
    return 0
