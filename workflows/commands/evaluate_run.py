"""The run of ``gramtile evaluate`` (its options and help: :mod:`gramtile.workflows.commands.evaluate`)."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from gramtile.kernels.registry import as_spec
from gramtile.pipeline import optional
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
from gramtile.pipeline.learn.learners.base import option_dest
from gramtile.pipeline.learn.learners.linear import FeatureData
from gramtile.pipeline.learn.learners.registry import LEARNERS, names_for_task
from gramtile.pipeline.learn.nystroem import LandmarkSource
from gramtile.pipeline.learn.report import (
    SCORE_COLUMNS,
    markdown_table,
    plot_learning_curve,
    report_tables,
    task_columns,
)
from gramtile.pipeline.learn.sources import ViewKernelSource, open_gram_source, read_labels, store_labels
from gramtile.pipeline.learn.tasks import task_of, task_targets
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.storage import refuse_url
from gramtile.workflows.commands.running import check_output_dir, runtime, write_json_atomic, write_text_atomic


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
    if args.curve is not None and args.out:  # the curve's plot needs matplotlib: refused before any fit
        optional.require("plots", then=", or leave out --out (the curve is then printed, not plotted)")
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
        log.debug(f"evaluate: source {type(source).__name__} over {source.n} examples, learner {learner.name} "
                  f"reading {learner.reads}, task {task}; {len(splits)} split(s) of "
                  f"{'/'.join(str(len(sp.train)) for sp in splits[:5])}{'/...' if len(splits) > 5 else ''} training "
                  f"examples; {len(points)} grid point(s)"
                  + (f" ({', '.join(varying)} varying, nested {args.inner_folds}-fold inside each training part)"
                     if varying and not args.C_on_test else ""))
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
            write_json_atomic(d / "results.json", _jsonable(out))
            write_text_atomic(d / "results.md", "\n".join(md) + "\n")
            log.info(f"wrote {d / 'results.md'} and {d / 'results.json'}")
    return 0
