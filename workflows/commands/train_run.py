"""The run of ``gramtile train`` (its options and help: :mod:`gramtile.workflows.commands.train`)."""
from __future__ import annotations

import time

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.learn.crossval import parse_class_weight
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.learners.linear import FeatureData
from gramtile.pipeline.learn.linear import train_store
from gramtile.pipeline.learn.models import read_documents, relabel
from gramtile.pipeline.learn.models import stored_kernel as _stored
from gramtile.pipeline.learn.nystroem import LandmarkSource, train_nystroem
from gramtile.pipeline.learn.sources import store_labels
from gramtile.pipeline.learn.tasks import retarget, task_of
from gramtile.pipeline.learn.training import select_point, train, train_from_store
from gramtile.pipeline.parsing import links
from gramtile.pipeline.progress import log
from gramtile.pipeline.readers.labels import read_label_file
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.commands.evaluate_run import check_task_options, learner_of
from gramtile.workflows.commands.running import check_output_dir, runtime
from gramtile.workflows.datainput import reader_options as data_options


def stored_kernel(spec, grams, corpus_hash=None):
    """K_spec over a square Gram store's rows and those rows (see :func:`gramtile.pipeline.learn.models.stored_kernel`)."""

    K, rows, _ = _stored(spec, grams, corpus_hash)
    return K, rows


def run(args) -> int:

    t0 = time.perf_counter()
    options = data_options(args, args.format) if args.input else {}
    if not args.input and any(getattr(args, k) is not None for k in ("text_col", "label_col", "id_col", "header",
                                                                     "fields", "target_col", "group_col")):
        raise EvaluationError("--text-col, --label-col, --id-col, --fields, --target-col, --group-col and --header "
                              "read --input; a corpus store already holds its texts, labels, targets and groups "
                              "(--targets FILE and --groups FILE replace its targets and groups)")
    labels_file = options.pop("labels", None) if args.input else args.labels
    if args.features and args.labels:
        raise EvaluationError("--labels is not available with --features: a feature store holds its corpus's labels; "
                              "prepare the corpus with --labels FILE and write the feature store from it")
    learner, grid = learner_of(args)
    task = task_of(learner, args.task)
    if task == "classification":
        learner.check_capabilities(args.multiclass, parse_class_weight(args.class_weight))
    check_task_options(args, task)
    if args.kernel and args.normalized:
        spec0 = as_spec(args.kernel)
        args.kernel = spec0.to_json() if spec0.kind == "normalized" else \
            as_spec({"kind": "normalized", "kernel": spec0.to_dict()}).to_json()
    elif args.normalized:
        raise EvaluationError("--normalized applies to --kernel; a feature store's rows are normalised when it is "
                              "written (`gramtile features` of a normalized spec)")
    if args.features or learner.reads == "features":
        if not args.features or learner.reads != "features" or args.gram or args.kernel:
            raise EvaluationError("--features F.zarr goes with --model linear (no --kernel, no --gram: the store "
                                  "names its kernel); --model linear needs --features")
        out = check_output_dir(args.out, "--out", args.overwrite, owned=("model.json", "weights.npz", "linear.json", "linear.npz"),
                               kind="model directory")
        # a model directory is written whole or not at all, and never over one that appeared meanwhile
        cw = parse_class_weight(args.class_weight)
        rt = runtime(args)
        data = FeatureData.open(args.features, args.rows)
        point, record = select_point(learner, data, data.labels, grid, args.inner_folds, args.fold_seed,
                                     class_weight=cw, cluster=rt)
        m = train_store(args.features, None, C=point["C"], class_weight=cw, solver=args.linear_solver,
                        epochs=args.sgd_epochs, chunk_rows=args.sgd_chunk_rows, rows=args.rows,
                        loss=args.linear_loss, cluster=rt)
        if record:
            m.params["selection"] = record
        m.save(out, overwrite=args.overwrite)
        print(f"{args.out}: linear model ({m.params['solver']['used']}) over {m.n_features} features, classes "
              f"{m.classes} ({time.perf_counter() - t0:.1f} s)")
        return 0
    if not args.kernel:
        raise EvaluationError("--kernel SPEC is required (unless --features F.zarr --model linear)")
    out = check_output_dir(args.out, "--out", args.overwrite, owned=("model.json",), kind="model directory")
    spec = as_spec(args.kernel)
    learn = dict(learner=learner, grid=grid, class_weight=parse_class_weight(args.class_weight),
                 multiclass=args.multiclass, seed=args.perceptron_seed, solver=args.solver, cluster=runtime(args),
                 inner_folds=args.inner_folds, inner_seed=args.fold_seed, task=task)
    if task != "classification" and learner.reads != "kernel":
        raise EvaluationError(f"--model {learner.name} reads {learner.reads}; a {task} model is a kernel expansion")
    if learner.reads == "landmarks":
        if "landmarks" in grid:
            raise EvaluationError("--landmarks is evaluate's landmark count per split; train reads the landmarks of "
                                  "its landmark store (--gram made by `gramtile gram --landmarks M`): drop --landmarks")
        if not args.corpus or len(args.gram) != 1:
            raise EvaluationError("--model nystroem needs --corpus and one --gram: a landmark store made by "
                                  "`gramtile gram --corpus C --landmarks M`")
        st = GramStore.open(args.gram[0])
        src = LandmarkSource(st, normalized=spec.kind == "normalized")
        y = store_labels(st) if labels_file is None else read_label_file(labels_file, src.n, f"rows of {st.path}")
        point, record = select_point(learner, src, [str(v) for v in y], {"C": grid.get("C", 1.0)}, args.inner_folds,
                                     args.fold_seed, class_weight=learn["class_weight"], cluster=learn["cluster"])
        m = train_nystroem(args.corpus, st, spec, C=point["C"], class_weight=learn["class_weight"],
                           loss=args.linear_loss, labels_file=labels_file, cluster=learn["cluster"])
        if record:
            m.params["selection"] = record
    elif args.gram:
        if not args.corpus:
            raise EvaluationError("--gram needs --corpus (the Gram store's rows are corpus examples)")
        # K from the Gram stores; the model carries the corpus store's stored resources
        m = train_from_store(args.corpus, args.gram, spec, labels_file=labels_file, targets_file=args.targets,
                             groups_file=args.groups, **learn)
    else:
        prov = {}
        if args.corpus:

            cs = CorpusStore.open(args.corpus)
            docs = relabel(cs.documents(), labels_file, f"examples of {args.corpus}")
            prov.update(corpus=str(args.corpus), corpus_hash=cs.content_hash)
        else:
            docs = read_documents(args.input, args.format, model=args.spacy_model, labels=labels_file,
                                  links=links.wanted(spec.reps()), **options)
            prov.update(input=str(args.input), format=args.format)
        docs = retarget(docs, args.targets, args.groups, f"examples of {args.corpus or args.input}")
        if labels_file:
            prov.update(labels=str(labels_file))
        # K in memory; resources built from these examples, as gramtile.gram builds them
        m = train(docs, spec, provenance=prov, **learn)
    # a model directory is written whole or not at all, and never over one that appeared meanwhile
    m.save(out, overwrite=args.overwrite)
    what = f"{len(m.classes)} classes" if m.task == "classification" else m.task
    log.info(f"gramtile train: {args.model} ({m.scheme}) on {m.provenance['n_train']} examples, {what}, "
             f"{m.n_support} support examples; model written to {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0
