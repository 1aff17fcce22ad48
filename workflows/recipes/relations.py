"""Relation-extraction workflows: CoNLL04 (Zelenko et al. 2003's Tables 2-3, Figures 5-6) and
SemEval-2010 Task 8 (10-fold cross-validation, official macro-F1).

Both are ``recipe`` workflows of ``gramtile run`` (see :mod:`gramtile.workflows.runner`): the
YAML file names :func:`run` and holds the science (data, kernels, protocol); this module builds
relation examples from the parses, writes one corpus store and one Gram store per base kernel
under ``--out`` (reused by a rerun), and evaluates.

``task: conll04`` (workflows/conll04_relations.yaml)
    For each relation (``Work_For`` = person-affiliation, ``OrgBased_In`` =
    organization-location): candidate pairs from gold entities, relation examples from gold PoS
    (+ spaCy heads for prepositional attachment when ``parser: spacy``), train on the SpERT
    train + dev sentences, test on the test sentences. Rows: recall, precision, F1 of the
    Appendix C feature learners (Naive Bayes, Winnow, linear SVM) and of the voted perceptron and
    SVM with every kernel; learning curves of F1 over growing nested training subsets. A list of
    C values (``protocol.C``, ``protocol.feature_C``) is searched without the test sentences,
    with ``protocol.select: dev`` (default) on the dev sentences (train -> dev), with
    ``select: cv`` by ``cv_folds``-fold cross-validation by sentence on train + dev
    (:func:`sentence_folds`, mean fold F1); the chosen C is retrained on train + dev and test is
    scored once. ``scope: sentence`` roots every example at the Sentence node
    (:func:`~gramtile.pipeline.parsing.relation_build.relation_example`; default ``lcs``).

``task: semeval2010`` (workflows/semeval2010_relations.yaml)
    The 8,000 training sentences parsed by spaCy; structures ``relation`` (relation example),
    ``path`` (shortest dependency path), ``pet`` (GRCT tree of the path-enclosed dependency
    subtree) and ``seq`` (words from e1 to e2); stratified k-fold SVM (one-vs-one over the 19
    labels) and the task's official macro-F1 (:func:`~gramtile.pipeline.readers.semeval.official_f1`).
"""
from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from gramtile.kernels.errors import GramtileError
from gramtile.pipeline import optional
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.executors import SequentialExecutor
from gramtile.pipeline.compute.prepare import write_shards
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.crossval import evaluate, learning_curve, nested_order
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import Split, fixed_split, stratified_kfold
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.metrics import binary_prf
from gramtile.pipeline.learn.relation_features import (
    LEARNERS,
    FeatureSVM,
    RelationExamples,
    feature_learner,
    feature_matrix,
)
from gramtile.pipeline.learn.report import markdown_table
from gramtile.pipeline.learn.sources import ViewKernelSource
from gramtile.pipeline.parsing.parse import default_model_name, load_model, parse_deps
from gramtile.pipeline.parsing.relation_build import Mention, TaggedSentence, relation_example
from gramtile.pipeline.parsing.semeval import records_to_documents
from gramtile.pipeline.readers.conll04 import RELATION_ARGS, candidate_pairs, load_split, read_corp
from gramtile.pipeline.readers.semeval import official_f1, read_semeval
from gramtile.pipeline.representations.relation import relation_to_json
from gramtile.pipeline.representations.structures import Document
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.runner import parse_kernels, raise_bad_key, resolve_path

_COMMON = {"name", "description", "recipe", "task", "kernels", "protocol", "report", "data", "limit"}
_CONLL = _COMMON | {"relations", "parser", "scope"}
_CONLL_PROTOCOL = {"C", "epochs", "seed", "perceptron_seed", "feature_learners", "feature_C", "learning_curve",
                   "select", "cv_folds"}
_SEMEVAL_PROTOCOL = {"C", "folds", "seed", "multiclass"}


def _check_keys(path, where, obj, allowed):
    if not isinstance(obj, dict):
        raise_bad_key(path, where or "(top level)", obj, "must be a mapping")
    for k in obj:
        if k not in allowed:
            raise_bad_key(path, f"{where}{k}", obj[k], f"unknown key; allowed keys here are {sorted(allowed)}")


def _positive(path, key, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise_bad_key(path, key, v, "must be a positive number")
    return float(v)


def _say(progress):
    return (lambda s: print(f"gramtile run: {s}", file=sys.stderr, flush=True)) if progress else (lambda s: None)


# ---- stores ------------------------------------------------------------------------------

def corpus_from_documents(make_docs, out: Path, source: str, options: dict, progress: bool = True,
                          shard_size: int = 1000):
    """The corpus store ``out`` of the Documents ``make_docs()`` (structures already built).

    A complete store made from the same ``source`` and ``options`` is reused without calling
    ``make_docs``; any other store at ``out`` belongs to this recipe and is rebuilt.
    ``shard_size`` fixes the order in which vocabulary ids are assigned (shard by shard).
    """

    opts = json.loads(json.dumps(options))
    if out.exists():
        try:
            store = CorpusStore.open(out)
            if store.complete and store.manifest["source"] == source and store.manifest.get("options") == opts:
                return store
        except GramtileError:
            pass
        shutil.rmtree(out)
    store = CorpusStore.create(out, source=source, input_format="recipe", shard_size=shard_size, options=opts)
    run = store.begin_run({"cluster": "sequential", "recipe": "gramtile.workflows.recipes.relations"})
    write_shards(store, iter(make_docs()), SequentialExecutor(), run, default_model_name(), False, progress, None)
    store.finish()
    store.close()
    return CorpusStore.open(out)


def gram_sources(specs: dict, corpus, out: Path, cluster="local", tile=None):
    """One Gram store per distinct base kernel of ``specs``; returns (name -> kernel source, hash -> seconds)."""

    stores, seconds = {}, {}
    for spec in specs.values():
        for b in spec.base_specs():
            if b.spec_hash in stores:
                continue
            path = out / f"gram-{b.kind}-{b.spec_hash[:12]}.zarr"
            t0 = time.perf_counter()
            run_gram(corpus, b, path, tile=tile, cluster=cluster)
            seconds[b.spec_hash] = time.perf_counter() - t0
            stores[b.spec_hash] = GramStore.open(path)
    return {name: ViewKernelSource(ComposedView(spec, stores)) for name, spec in specs.items()}, seconds


# ---- CoNLL04 -----------------------------------------------------------------------------

ROLES = {"Work_For": ("member", "affiliation")}


def conll04_documents(sentences, relation: str, heads: dict | None = None, lemmas: dict | None = None,
                      scope: str = "lcs"):
    """Documents (label ``"1"``/``"-1"``, structure ``"relation"``) of the candidate pairs of ``relation``.

    ``heads`` / ``lemmas`` map a sentence id to its parser heads / lemmas (gold PoS is kept).
    """

    roles = ROLES.get(relation, ("arg1", "arg2"))
    docs = []
    for c in candidate_pairs(sentences, relation):
        s = c.sentence
        sent = TaggedSentence(s.words, s.pos, (lemmas or {}).get(s.id), (heads or {}).get(s.id))
        others = [Mention(*e) for e in s.entities]
        rel = relation_example(sent, Mention(*c.head), Mention(*c.tail), roles, others, scope)
        docs.append(Document(id=f"{s.id}:{c.head[0]}-{c.head[1]}:{c.tail[0]}-{c.tail[1]}",
                             label="1" if c.label else "-1", text=" ".join(s.words), structures={"relation": rel},
                             source=s.source))
    return docs


def examples_digest(docs) -> str:
    """sha256 of the documents' ids, labels and relation examples (JSON form), in order."""


    h = hashlib.sha256()
    for x in docs:
        h.update(json.dumps([x.id, x.label, relation_to_json(x.structures["relation"])], sort_keys=True).encode())
    return h.hexdigest()


def builder_digest() -> str:
    """sha256 over the source of the modules that turn SemEval sentences into examples, and the
    spaCy model's name and version: it keys the SemEval corpus store, so a rerun after a change
    in how examples are built (or parsed) rebuilds them instead of reusing stale ones, without
    having to parse everything to find out (as :func:`examples_digest` would)."""


    h = hashlib.sha256()
    for name in ("gramtile.pipeline.readers.semeval", "gramtile.pipeline.parsing.relation_build", "gramtile.pipeline.representations.relation",
                 "gramtile.pipeline.parsing.derive", "gramtile.pipeline.parsing.parse"):
        h.update(Path(importlib.import_module(name).__file__).read_bytes())
    meta = load_model().meta
    h.update(f"{meta.get('lang')}_{meta.get('name')} {meta.get('version')}".encode())
    return h.hexdigest()


def spacy_heads(sentences):
    """spaCy heads and lemmas of pre-tokenised sentences: ``({id: heads}, {id: lemmas})``."""

    deps = parse_deps([" ".join(s.words) for s in sentences], pretokenized=True)
    return ({s.id: d.heads for s, d in zip(sentences, deps)}, {s.id: d.lemmas for s, d in zip(sentences, deps)})


def feature_scores(train_docs, test_docs, learners, C=1.0, seed=0, fractions=None):
    """Precision/recall/F1 of Appendix C feature learners; with ``fractions``, one row per nested subset."""

    Xtr_all, vocab = feature_matrix([d.structures["relation"] for d in train_docs])
    Xte, _ = feature_matrix([d.structures["relation"] for d in test_docs], vocab)
    ytr = np.array([d.label for d in train_docs])
    yte = np.array([d.label for d in test_docs])
    order = nested_order(ytr, seed) if fractions else np.arange(len(ytr))
    rows = []
    for f in (fractions or [1.0]):
        k = int(np.ceil(f * len(ytr)))
        sel = np.sort(order[:k])
        for name in learners:
            est = feature_learner(name, C=C, seed=seed)
            est.fit(Xtr_all[sel], ytr[sel])
            pred = np.asarray(est.predict(Xte))
            p, r, f1 = binary_prf(yte, pred, "1")
            rows.append({"kernel": "features", "model": name, "n_train": int(k), "fraction": float(f),
                         "precision": p, "recall": r, "f1": f1, "accuracy": float(np.mean(pred == yte))})
    return rows


def _grid(path, key, v):
    vs = v if isinstance(v, list) else [v]
    if not vs:
        raise_bad_key(path, key, v, "give a number or a non-empty list of numbers")
    return sorted(_positive(path, key, x) for x in vs)


def sentence_folds(doc_ids, k: int, seed: int = 0):
    """``k`` cross-validation folds of the examples ``0 .. len(doc_ids) - 1`` by sentence.

    Candidate pairs of one sentence share its words, so they stay in one fold (a fold split by
    pair would let a test sentence's other pairs into training). The sentence of a document id
    ``"<sentence id>:<s>-<e>:<s>-<e>"`` (:func:`conll04_documents`) is the id without its two
    mention spans; the sorted distinct sentences are permuted by ``numpy.random.default_rng(seed)``
    and sentence ``r`` of the permutation goes to fold ``r % k``.

    Parameters
    ----------
    doc_ids : sequence of str
    k : int >= 2
    seed : int

    Returns
    -------
    list of Split (``fold-0`` ..), the same for every kernel and learner given the same ids (the
    examples after ``doc_ids`` in a corpus, e.g. the test sentences, are in no fold)
    """

    sid = np.array([str(d).rsplit(":", 2)[0] for d in doc_ids])
    sentences = np.unique(sid)
    if isinstance(k, bool) or not isinstance(k, int) or k < 2 or k > sentences.size:
        raise EvaluationError(f"cv_folds={k!r}: cross-validation by sentence needs 2 <= folds <= the "
                              f"{sentences.size} training sentences; give protocol.cv_folds in that range")
    fold_of = dict(zip(sentences, np.random.default_rng(seed).permutation(sentences.size) % k))
    fold = np.array([fold_of[s] for s in sid], dtype=np.int64)
    idx = np.arange(len(sid), dtype=np.int64)
    return [Split(idx[fold != f], idx[fold == f], f"fold-{f}") for f in range(k)]


def run_conll04(raw, path, out: Path, cluster="local", tile=None) -> list[dict]:
    """CoNLL04 recipe (module docstring). With several values of ``protocol.C`` / ``feature_C``,
    each SVM's C is chosen without the test sentences: by F1 on the SpERT dev sentences after
    training on the SpERT train sentences only (``select: dev``), or by the mean F1 of a
    cross-validation by sentence on train + dev (``select: cv``, the same folds for every SVM);
    the chosen C is then retrained on train + dev and scored once on test."""

    _check_keys(path, "", raw, _CONLL)
    progress = Runtime.of(cluster).progress
    say = _say(progress)
    data = resolve_path(path, "data", raw.get("data", "${SHARED}/conll04"))
    rels = raw.get("relations", ["Work_For", "OrgBased_In"])
    if not isinstance(rels, list) or not rels or any(r not in RELATION_ARGS for r in rels):
        raise_bad_key(path, "relations", rels, f"a list of CoNLL04 relations from {list(RELATION_ARGS)}")
    parser = raw.get("parser", "spacy")
    if parser not in ("spacy", "none"):
        raise_bad_key(path, "parser", parser, "use spacy (heads for prepositional attachment) or none (nearest host)")
    scope = raw.get("scope", "lcs")
    if scope not in ("lcs", "sentence"):
        raise_bad_key(path, "scope", scope, "use lcs (least common subtree of the mentions) or sentence (rooted at the "
              "Sentence node)")
    limit = raw.get("limit") or {}
    _check_keys(path, "limit.", limit, {"train", "dev", "test"})
    for k, v in limit.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise_bad_key(path, f"limit.{k}", v, "a positive number of sentences")
    specs = parse_kernels(path, raw.get("kernels"))
    proto = raw.get("protocol") or {}
    _check_keys(path, "protocol.", proto, _CONLL_PROTOCOL)
    Cs = _grid(path, "protocol.C", proto.get("C", 1.0))
    fCs = _grid(path, "protocol.feature_C", proto.get("feature_C", 1.0))
    epochs = int(proto.get("epochs", 2))
    seed = int(proto.get("seed", 0))
    pseed = proto.get("perceptron_seed", 0)
    learners = proto.get("feature_learners", list(LEARNERS))
    if not isinstance(learners, list) or any(x not in LEARNERS for x in learners):
        raise_bad_key(path, "protocol.feature_learners", learners, f"a list from {list(LEARNERS)}")
    select_by = proto.get("select", "dev")
    if select_by not in ("dev", "cv"):
        raise_bad_key(path, "protocol.select", select_by, "use dev (train -> dev) or cv (cross-validation by sentence on "
              "train + dev) to choose C")
    cv_folds = proto.get("cv_folds", 5)
    if isinstance(cv_folds, bool) or not isinstance(cv_folds, int) or cv_folds < 2:
        raise_bad_key(path, "protocol.cv_folds", cv_folds, "an integer >= 2 (folds of the cross-validation by sentence)")
    sel_key = "dev_f1" if select_by == "dev" else "cv_f1"
    fractions = proto.get("learning_curve", [0.1, 0.25, 0.5, 0.75, 1.0])
    if fractions and (not isinstance(fractions, list) or any(not (0 < float(f) <= 1) for f in fractions)):
        raise_bad_key(path, "protocol.learning_curve", fractions, "a list of fractions in (0, 1], or [] for none")
    if fractions:  # the curves are plotted
        optional.require("plots", then=f", or set protocol.learning_curve: [] in {path}")

    t0 = time.perf_counter()
    corp = read_corp(data / "conll04.corp")
    parts = {k: load_split(data, k, corp) for k in ("train", "dev", "test")}
    for k, v in limit.items():
        parts[k] = parts[k][:v]
    heads = lemmas = None
    if parser == "spacy":
        heads, lemmas = spacy_heads(parts["train"] + parts["dev"] + parts["test"])
    say(f"CoNLL04: {len(parts['train'])} train, {len(parts['dev'])} dev and {len(parts['test'])} test sentences "
        f"read{' and parsed' if heads else ''} in {time.perf_counter() - t0:.1f} s")
    rows, curves = [], []
    for rel in rels:
        d = out / rel
        d.mkdir(parents=True, exist_ok=True)
        only_docs = conll04_documents(parts["train"], rel, heads, lemmas, scope)
        tr_docs = only_docs + conll04_documents(parts["dev"], rel, heads, lemmas, scope)
        te_docs = conll04_documents(parts["test"], rel, heads, lemmas, scope)
        say(f"{rel}: {len(tr_docs)} train+dev candidates ({sum(x.label == '1' for x in tr_docs)} positive), "
            f"{len(te_docs)} test ({sum(x.label == '1' for x in te_docs)} positive)")
        # scope only when not the default, so stores made before it existed stay reusable
        source = json.dumps({"data": str(data), "relation": rel, "parser": parser, "limit": limit,
                             **({"scope": scope} if scope != "lcs" else {})})
        # the examples' digest keys the store too: a rerun after a change in how examples are
        # built must not reuse the Gram matrices of the old ones
        corpus = corpus_from_documents(lambda: tr_docs + te_docs, d / "corpus.zarr", source,
                                       {"task": "conll04", "relation": rel, "examples": examples_digest(tr_docs + te_docs)},
                                       progress)
        labels = corpus.labels
        n0, ntr, n = len(only_docs), len(tr_docs), corpus.n
        split = fixed_split(np.arange(ntr), np.arange(ntr, n), n)
        grids = len(Cs) > 1 or len(fCs) > 1
        if select_by == "dev":
            select = n0 < ntr and len(set(labels[:n0])) == 2
            if grids and not select:
                raise_bad_key(path, "protocol.C", Cs, "choosing C needs dev sentences and both classes among the train "
                      "sentences' candidates; give one C or raise limit.train / limit.dev")
            held = [fixed_split(np.arange(n0), np.arange(n0, ntr), n)] if select else None
        else:
            held = sentence_folds([x.id for x in tr_docs], cv_folds, seed) if grids else None
            if held and any(len(set(np.asarray(labels)[sp.train])) < 2 for sp in held):
                raise_bad_key(path, "protocol.cv_folds", cv_folds, "every fold's training part needs both classes; "
                      "use fewer folds or raise limit.train / limit.dev")

        t1 = time.perf_counter()
        for name in learners:
            grid = fCs if name == "linear_svm" else [fCs[0]]
            c, held_f1 = grid[0], None
            if len(grid) > 1:
                # the feature SVM's C by the mean F1 of the same held-out parts as the kernel SVMs' (the dev
                # sentences, or the sentence folds), each part with the vocabulary of its training examples;
                # ties to the smaller C; in this process
                point, ev = selection.choose(FeatureSVM(), RelationExamples(x.structures["relation"] for x in tr_docs),
                                             [x.label for x in tr_docs], {"C": grid}, splits=held, metric="f1",
                                             score="mean", positive="1", kernel="features",
                                             cluster=Runtime.of("sequential", progress=False))
                c = float(point["C"])
                held_f1 = selection.point_scores(ev, "f1", "mean")[ev.points.index(point)]
            r = feature_scores(tr_docs, te_docs, [name], c, seed)[0]
            rows.append({"relation": rel, **r, "C": c if name == "linear_svm" else None, sel_key: held_f1,
                         "seconds": round(time.perf_counter() - t1, 2)})
        sources, seconds = gram_sources(specs, corpus, d, cluster, tile)
        learn = dict(cluster=cluster)  # every fold x C fit a task
        chosen = {}
        for name, src in sources.items():
            t1 = time.perf_counter()
            for model in ("perceptron", "svm"):
                c, dev_f1 = None, None
                if model == "svm" and len(Cs) > 1:
                    # C chosen by the mean F1 of the held-out folds of the training part (one fold with
                    # select: dev; sentence folds with select: cv), ties to the smaller C, then fitted on
                    # the whole training part and scored once on test: nested selection in the one loop
                    ev = selection.evaluate(make("svm"), src, labels, [split], {"C": list(Cs)}, kernel=name,
                                            positive="1", select="nested", inner=[[(h.train, h.test) for h in held]],
                                            metric="f1", score="mean", **learn)
                    c = chosen[name] = float(ev.chosen[0]["C"])
                    dev_f1 = ev.inner_scores[0][list(Cs).index(c)]
                else:
                    if model == "svm":
                        c = chosen[name] = Cs[0]
                    ev = evaluate(src, labels, [split], model=model, C=(c or 1.0,), epochs=epochs, kernel=name,
                                  positive="1", seed=pseed, **learn)
                for r in ev.rows:
                    rows.append({"relation": rel, "kernel": name, "model": model, "n_train": ntr,
                                 "precision": r["precision"], "recall": r["recall"], "f1": r["f1"],
                                 "accuracy": r["accuracy"], "C": c, sel_key: dev_f1,
                                 "seconds": round(time.perf_counter() - t1, 2),
                                 "gram_seconds": round(sum(seconds[b.spec_hash] for b in specs[name].base_specs()), 2)})
        if fractions:
            fr = [float(f) for f in fractions]
            for name in learners:
                c = next(r["C"] for r in rows if r["relation"] == rel and r["model"] == name) or fCs[0]
                for r in feature_scores(tr_docs, te_docs, [name], c, seed, fr):
                    curves.append({"relation": rel, **r})
            for name, src in sources.items():
                for r in learning_curve(src, labels, [split], fr, model="svm", C=(chosen[name],), seed=seed,
                                        kernel=name, positive="1", **learn):
                    curves.append({"relation": rel, "kernel": name, "model": "svm", "n_train": r["n_train"],
                                   "fraction": r["fraction"], "precision": r["precision"], "recall": r["recall"],
                                   "f1": r["f1"]})
        say(f"{rel}: " + ", ".join(f"{r['kernel']}/{r['model']} F1 {r['f1']:.3f}" for r in rows
                                   if r["relation"] == rel))
    _report(raw, path, out, rows, curves, time.perf_counter() - t0, conll=True)
    return rows


# ---- SemEval-2010 Task 8 -----------------------------------------------------------------

def run_semeval(raw, path, out: Path, cluster="local", tile=None) -> list[dict]:

    _check_keys(path, "", raw, _COMMON)
    progress = Runtime.of(cluster).progress
    say = _say(progress)
    data = resolve_path(path, "data", raw.get("data", "${SHARED}/semeval2010_task8_train/TRAIN_FILE.TXT"))
    limit = raw.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise_bad_key(path, "limit", limit, "a positive number of sentences (first ones), or leave it out")
    specs = parse_kernels(path, raw.get("kernels"))
    proto = raw.get("protocol") or {}
    _check_keys(path, "protocol.", proto, _SEMEVAL_PROTOCOL)
    C = _positive(path, "protocol.C", proto.get("C", 1.0))
    folds, seed = int(proto.get("folds", 10)), int(proto.get("seed", 0))
    multiclass = proto.get("multiclass", "ovo")
    t0 = time.perf_counter()

    def docs():
        recs = list(read_semeval(data))
        return list(records_to_documents(recs[:limit] if limit else recs, data))

    corpus = corpus_from_documents(docs, out / "corpus.zarr", json.dumps({"data": str(data), "limit": limit}),
                                   {"task": "semeval2010", "builder": builder_digest()}, progress)
    say(f"SemEval-2010: {corpus.n} sentences ready in {time.perf_counter() - t0:.1f} s")
    labels = list(corpus.labels)
    y = np.asarray(labels)
    # stratify on the relation without its direction: Entity-Destination(e2,e1) has one example
    splits = stratified_kfold([y.split("(")[0] for y in labels], folds, seed)
    sources, seconds = gram_sources(specs, corpus, out, cluster, tile)
    rows = []
    for name, src in sources.items():
        t1 = time.perf_counter()
        ev = evaluate(src, labels, splits, model="svm", C=(C,), multiclass=multiclass, kernel=name,
                      cluster=cluster)
        for key, (idx, pred) in ev.predictions.items():
            score = official_f1(y[idx], pred)
            rows.append({"kernel": name, "model": "svm", "C": C, "folds": folds,
                         "macro_f1": score["macro_f1"], "precision": score["macro_precision"],
                         "recall": score["macro_recall"], "accuracy": float(np.mean(y[idx] == pred)),
                         "gram_seconds": round(sum(seconds[b.spec_hash] for b in specs[name].base_specs()), 2),
                         "learn_seconds": round(time.perf_counter() - t1, 2)})
        say(f"{name}: official macro-F1 {rows[-1]['macro_f1']:.4f} ({rows[-1]['learn_seconds']} s)")
    _report(raw, path, out, rows, [], time.perf_counter() - t0, conll=False)
    return rows


# ---- report ------------------------------------------------------------------------------

def _report(raw, path, out, rows, curves, seconds, conll):

    (out / "results.json").write_text(json.dumps({"rows": rows, "learning_curves": curves}, indent=1))
    title = (raw.get("report") or {}).get("title") or raw.get("name") or Path(path).stem
    md = [f"# {title}\n", f"Workflow `{Path(path).name}`, {seconds:.0f} s.\n"]
    if conll:
        for rel in dict.fromkeys(r["relation"] for r in rows):
            md += [f"## {rel}\n", markdown_table([r for r in rows if r["relation"] == rel],
                                                 columns=["kernel", "model", "C", _sel_column(rows), "n_train",
                                                          "recall", "precision", "f1"]),
                   ""]
            if curves:
                png = out / f"learning_curve_{rel}.png"
                plot_curves([c for c in curves if c["relation"] == rel], png, f"{rel}: F1 learning curves")
                md.append(f"![{rel} learning curve]({png.name})\n")
    else:
        md += [markdown_table(rows, columns=["kernel", "C", "folds", "precision", "recall", "macro_f1", "accuracy"]), ""]
    (out / "results.md").write_text("\n".join(md))


def _sel_column(rows):
    return "cv_f1" if any("cv_f1" in r for r in rows) else "dev_f1"


def plot_curves(curves, png, title):
    """F1 against the number of training examples, one line per (kernel, model)."""
    plt = optional.pyplot()

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for key in dict.fromkeys((c["kernel"], c["model"]) for c in curves):
        pts = sorted((c["n_train"], c["f1"]) for c in curves if (c["kernel"], c["model"]) == key)
        ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker="o", label=f"{key[0]} {key[1]}")
    ax.set_xlabel("training examples")
    ax.set_ylabel("F1 (%)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def run(raw, path, out, cluster="local", tile=None) -> list[dict]:
    """Recipe entry point of ``gramtile run`` for ``task: conll04`` and ``task: semeval2010``.

    Gram stores and the learning fits (each fold x C of the SVM evaluations, and each split x
    fraction of the kernel learning curves) run on one cluster of ``cluster``, with
    the serial run's results; the feature learners run in this process."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    task = raw.get("task")
    if task not in ("conll04", "semeval2010"):
        raise_bad_key(path, "task", task, "use conll04 or semeval2010")
    with Runtime.of(cluster) as rt:
        go = run_conll04 if task == "conll04" else run_semeval
        return go(raw, path, out, rt, tile)
