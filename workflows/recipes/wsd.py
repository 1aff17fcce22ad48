"""Word sense disambiguation with syntagmatic, domain and bag-of-words kernels (Giuliano,
Gliozzo, Strapparava 2006) on the *hard*, *line* and *serve* corpora: the recipe behind
``workflows/wsd.yaml`` (``gramtile run workflows/wsd.yaml --out DIR``).

For each word: read the senseval file (:mod:`gramtile.pipeline.readers.senseval`) and write its
documents (``wsd``: target sentence, ``seq``: whole context) into the corpus store
``DIR/<word>/corpus.zarr`` (one shard, so vocabulary ids are assigned as for in-memory examples;
a complete store of the same file and options is reused); build the corpus resources the
kernels name into that store (:func:`gramtile.pipeline.resources.build.ensure`: WordNet synonymy over
the vocabulary; the LSA lemma space and the IDF-weighted domain space from the word's own
contexts, no labels used; kernels reading target sentences name the contexts with
``space_rep: seq``); compute every distinct base kernel through the tiled engine
(:func:`gramtile.pipeline.compute.engine.run_gram`, the run's ``--cluster`` profile) into
``DIR/<word>/gram/<kind>-<hash16>.zarr`` (resumable: a rerun computes no tile); read each stored
base matrix once (:class:`gramtile.pipeline.stores.gram_view.GramView`), derive the composite kernels
with ``spec.combine``, and run seeded stratified k-fold SVM evaluation with C (and an
alternative) chosen per fold on its training part (:func:`learn`: every fit of a word a task on
the run's ``--cluster``, with the serial run's results; worker processes read their blocks from
the stores instead). Results: ``DIR/results.json`` (one row per word and kernel, with the Gram
seconds of its base kernels, the tiles computed and ``learn_seconds``, the wall time of the
word's learning phase, all its kernels' fits together) and
``DIR/results.md`` (accuracy table per kernel and word beside the majority baseline and
published figures).

YAML keys (all but ``recipe`` optional)::

    recipe: gramtile.workflows.recipes.wsd:run
    data: ${SHARED}/senseval_hard_line_serve   # folder holding <word>.pos
    words: [hard, line, serve]
    lemmas: wordnet                           # reader option: wordnet | words
    subsample: null                           # N: evenly spaced N instances per word (quick runs)
    kernels: {NAME: SPEC, ...}                 # evaluated in this order
    # NAME: {select: [SPEC, ...]} is one system whose alternative is chosen per outer fold,
    # together with C, on the inner split of that fold's training part (ties: the earlier
    # alternative, then the smaller C); each result row lists the per-fold choices.
    protocol: {folds: 10, seed: 0, C: 1, multiclass: ovr, class_weight: none}
    # C may be a list: chosen per outer fold by an inner stratified split of that fold's
    # training part only (inner_folds: 3 -> train on 2/3, validate on 1/3 of it; first inner
    # fold only, to bound the cost); ties go to the smaller C. Test folds never choose C.
    baselines: {hard: 79.7, ...}               # majority-class accuracy (%) per word, for the report
    published: {line: "88 (Pedersen 2000, naive Bayes ensemble)", ...}
    report: {title: ...}
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from gramtile.kernels.errors import GramtileError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.resource_builds import ensure
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.folds import Split, stratified_kfold
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.sources import ArrayKernelSource, ViewKernelSource
from gramtile.pipeline.readers.senseval import read_senseval
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.resources.domain import domain_resource
from gramtile.pipeline.resources.keys import keys_of, resource_names
from gramtile.pipeline.resources.similarity import lsa_similarity, wordnet_similarity
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_view import GramView
from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.recipes.relations import corpus_from_documents
from gramtile.workflows.runner import json_default, raise_bad_key, resolve_path

_TOP = {"name", "description", "recipe", "data", "words", "lemmas", "subsample", "kernels", "protocol",
        "baselines", "published", "report"}
_PROTOCOL = {"folds", "seed", "C", "inner_folds", "inner_splits", "multiclass", "class_weight"}


def _config(raw, path):
    """Validated settings of a WSD workflow mapping."""

    for k in raw:
        if k not in _TOP:
            raise_bad_key(path, k, raw[k], f"unknown key; allowed keys are {sorted(_TOP)}")
    cfg = {"data": resolve_path(path, "data", raw.get("data", "${SHARED}/senseval_hard_line_serve"))}
    words = raw.get("words", ["hard", "line", "serve"])
    if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
        raise_bad_key(path, "words", words, "a list of words whose <word>.pos files are in data, e.g. [hard, line, serve]")
    for w in words:
        if not (cfg["data"] / f"{w}.pos").is_file():
            raise_bad_key(path, "words", w, f"{cfg['data'] / (w + '.pos')} does not exist; name words of the data folder")
    cfg["words"] = words
    cfg["lemmas"] = raw.get("lemmas", "wordnet")
    if cfg["lemmas"] not in ("wordnet", "words"):
        raise_bad_key(path, "lemmas", cfg["lemmas"], "use wordnet (morphy lemmas) or words (lower-cased forms)")
    sub = raw.get("subsample")
    if sub is not None and (isinstance(sub, bool) or not isinstance(sub, int) or sub < 2):
        raise_bad_key(path, "subsample", sub, "an integer >= 2 (instances per word), or null for all")
    cfg["subsample"] = sub
    kernels = raw.get("kernels")
    if not isinstance(kernels, dict) or not kernels:
        raise_bad_key(path, "kernels", kernels, "a mapping name -> kernel spec")
    cfg["kernels"], cfg["select"] = {}, {}
    for name, s in kernels.items():
        alts = s["select"] if isinstance(s, dict) and set(s) == {"select"} else None
        if alts is not None and (not isinstance(alts, list) or not alts):
            raise_bad_key(path, f"kernels.{name}.select", alts, "a non-empty list of kernel specs (alternatives chosen per "
                                                        "outer fold on its training part)")
        specs = []
        for k, a in enumerate(alts if alts is not None else [s]):
            try:
                specs.append(as_spec(a))
            except (GramtileError, TypeError, ValueError, KeyError) as e:
                where = f"kernels.{name}" + ("" if alts is None else f".select[{k}]")
                raise_bad_key(path, where, a, f"not a valid kernel spec ({e})")
        cfg["kernels"][str(name)] = specs[0]
        cfg["select"][str(name)] = specs
    proto = raw.get("protocol") or {}
    for k in proto:
        if k not in _PROTOCOL:
            raise_bad_key(path, f"protocol.{k}", proto[k], f"unknown key; allowed keys are {sorted(_PROTOCOL)}")
    folds, seed = proto.get("folds", 10), proto.get("seed", 0)
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise_bad_key(path, "protocol.folds", folds, "an integer >= 2")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise_bad_key(path, "protocol.seed", seed, "an integer")
    C = proto.get("C", 1.0)
    Cs = C if isinstance(C, list) else [C]
    if not Cs or any(isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0 for c in Cs):
        raise_bad_key(path, "protocol.C", C, "a positive number, or a list of them (chosen on training folds only)")
    inner = proto.get("inner_folds", 3)
    if isinstance(inner, bool) or not isinstance(inner, int) or inner < 2:
        raise_bad_key(path, "protocol.inner_folds", inner, "an integer >= 2")
    inner_splits = proto.get("inner_splits", 1)
    if isinstance(inner_splits, bool) or not isinstance(inner_splits, int) or not 1 <= inner_splits <= inner:
        raise_bad_key(path, "protocol.inner_splits", inner_splits, f"an integer from 1 to inner_folds ({inner}): how many "
                                                           f"of the inner folds validate each choice")
    mc = proto.get("multiclass", "ovr")
    if mc not in ("ovr", "ovo"):
        raise_bad_key(path, "protocol.multiclass", mc, "use ovr or ovo")
    cw = proto.get("class_weight", "none")
    if cw not in ("none", "balanced", None):
        raise_bad_key(path, "protocol.class_weight", cw, "use none or balanced")
    cfg["protocol"] = {"folds": folds, "seed": seed, "C": sorted(float(c) for c in Cs), "inner_folds": inner,
                       "inner_splits": inner_splits, "multiclass": mc,
                       "class_weight": None if cw in ("none", None) else cw}
    for key in ("baselines", "published"):
        v = raw.get(key) or {}
        if not isinstance(v, dict):
            raise_bad_key(path, key, v, "a mapping word -> value")
        cfg[key] = v
    cfg["title"] = ((raw.get("report") or {}).get("title")) or raw.get("name") or "WSD"
    return cfg


def subsample_indices(labels, k: int) -> np.ndarray:
    """``k`` evenly spaced positions of the corpus (deterministic; keeps file order)."""
    n = len(labels)
    if k >= n:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))


def load_word(path, lemmas="wordnet", subsample=None):
    """Documents of one senseval file, optionally an evenly spaced subsample."""

    docs = list(read_senseval(path, lemmas=lemmas))
    if subsample is not None:
        docs = [docs[i] for i in subsample_indices(docs, subsample)]
    return docs


def corpus_data(docs, specs) -> dict:
    """Encoded batches (``wsd``, ``seq``) and every resource the specs' base kernels name, in memory.

    The in-memory counterpart of the workflow's corpus store (``bench/wsd.py`` times kernels
    on it; tests compare stored Grams with it). The LSA lemma proximity and the domain space are
    built from the whole contexts (``seq``), not the target sentences, whatever the specs'
    ``space_rep``, so the spaces see every document of the word.
    """

    vocabs = Vocabularies()
    data = {rep: encode([d.structures[rep] for d in docs], vocabs) for rep in ("wsd", "seq")}
    contexts = [d.structures["seq"] for d in docs]
    for spec in specs:
        for base in spec.base_specs():
            for name in resource_names(base):
                if name in data:
                    continue
                if name == "similarity/wordnet":
                    data[name] = wordnet_similarity(vocabs.sym.strings)
                elif name.startswith("similarity/lsa/"):
                    field = name.rsplit("/", 1)[1]
                    data[name] = lsa_similarity([list(getattr(c, field)) for c in contexts], vocabs.sym.strings)
                elif name.startswith("domain/"):
                    data[name] = domain_resource(name, vocabs.sym.strings, contexts)
                else:
                    raise WorkflowError(f"kernel {base.to_json()} needs resource {name!r}, which the WSD "
                                        f"workflow cannot build")
    return data


def word_corpus(docs, path: Path, source: Path, lemmas: str, subsample, progress=True):
    """The corpus store ``path`` of one word's documents (reused when complete for the same file
    contents, lemmas and subsample)."""


    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    opts = {"reader": "senseval", "sha256": digest, "lemmas": lemmas, "subsample": subsample}
    # one shard: ids are assigned to all target sentences, then all contexts, as in corpus_data,
    # so the SVD spaces see the symbols in the same order
    return corpus_from_documents(lambda: docs, path, str(source), opts, progress, shard_size=max(1, len(docs)))


def gram_stores(specs, corpus, gram_dir: Path, cluster="local", tile=None,
                say=lambda s: None) -> tuple[dict, dict, dict]:
    """One Gram store ``gram_dir/<kind>-<hash16>.zarr`` per distinct base kernel of ``specs``.

    The resources the kernels name are built into the corpus store first (under its lock), then
    :func:`gramtile.pipeline.compute.engine.run_gram` computes (or finishes) each store.

    Returns
    -------
    ({spec_hash: GramStore}, {spec_hash: seconds}, {spec_hash: tiles computed by this call})
    """

    bases = {}
    for spec in specs:
        for b in spec.base_specs():
            bases.setdefault(b.spec_hash, b)
    keys = list(dict.fromkeys(k for b in bases.values() for k in keys_of(b)))
    if keys:
        for group, r in ensure(corpus.path, keys).items():
            say(f"  resource {group}: {'built' if r['built'] else 'stored'}")
    gram_dir.mkdir(parents=True, exist_ok=True)
    stores, secs, tiles = {}, {}, {}
    for h, b in bases.items():
        path = gram_dir / f"{b.kind}-{h[:16]}.zarr"
        t0 = time.perf_counter()
        run_gram(corpus, b, path, tile=tile, cluster=cluster)
        secs[h] = time.perf_counter() - t0
        stores[h] = GramStore.open(path)
        ends = [r for r in stores[h].read_log() if r["event"] == "end"]
        tiles[h] = int(ends[-1].get("tiles_computed", 0)) if ends else 0
        say(f"  {b.to_json()}: {stores[h].shape[0]} x {stores[h].shape[1]}, {tiles[h]} tile(s) computed "
            f"in {secs[h]:.1f} s")
    return stores, secs, tiles


def stored_bases(stores: dict) -> dict:
    """``{spec_hash: (K, diag, diag)}`` read once from each Gram store, for ``spec.combine``.

    The folds read every row many times over, so each matrix is read whole once rather than
    chunk by chunk per fold.
    """

    out = {}
    for h, st in stores.items():
        v = GramView(st)
        dr, dc = v.diag()
        out[h] = (v.block(), dr, dc)
    return out


def run(raw, path, out, cluster="local", tile=None) -> list[dict]:
    """Run the WSD workflow (module docstring); return one result row per word and kernel.

    The Gram stores and the learning fits run on ``cluster`` (one cluster for the whole
    run); every fit of a word is a task (:func:`learn`), and the rows are those of the serial run.
    """

    with Runtime.of(cluster) as rt:
        return _run(raw, path, out, rt, tile)


def _run(raw, path, out, cluster, tile) -> list[dict]:
    path = Path(path)
    cfg = _config(raw, path)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    progress = cluster.progress
    say = (lambda s: print(f"gramtile run wsd: {s}", file=sys.stderr, flush=True)) if progress else (lambda s: None)
    p = cfg["protocol"]
    # threads and sequential learn in this process from matrices read once; worker processes read
    # their blocks from the stores (the same numbers: a composite is combined element by element)
    in_memory = cluster.in_process
    rows = []
    t_all = time.perf_counter()
    for word in cfg["words"]:
        t_word = time.perf_counter()
        src = cfg["data"] / f"{word}.pos"
        docs = load_word(src, cfg["lemmas"], cfg["subsample"])
        labels = [d.label for d in docs]
        say(f"{word}: {len(docs)} instances, {len(set(labels))} senses")
        every = [s for alts in cfg["select"].values() for s in alts]
        wdir = out / word
        wdir.mkdir(exist_ok=True)
        corpus = word_corpus(docs, wdir / "corpus.zarr", src, cfg["lemmas"], cfg["subsample"], progress)
        if corpus.ids != [d.id for d in docs]:
            raise WorkflowError(f"corpus store {corpus.path} holds other examples than {src}; delete it and rerun")
        stores, secs, tiles = gram_stores(every, corpus, wdir / "gram", cluster, tile, say)
        splits = stratified_kfold(labels, p["folds"], p["seed"])
        counts = {lab: labels.count(lab) for lab in set(labels)}
        majority = max(counts.values()) / len(labels)
        t0 = time.perf_counter()
        if in_memory:
            base = stored_bases(stores)
            systems = {name: [ArrayKernelSource(spec.combine(base)[0]) for spec in alts]
                       for name, alts in cfg["select"].items()}
            del base
        else:
            systems = {name: [ViewKernelSource(ComposedView(spec, stores)) for spec in alts]
                       for name, alts in cfg["select"].items()}
        got = learn(systems, labels, splits, p, cluster=cluster)
        del systems
        learn_s = round(time.perf_counter() - t0, 2)
        for name, alts in cfg["select"].items():
            r = got[name]
            bases = {b.spec_hash for spec in alts for b in spec.base_specs()}
            r.update({"word": word, "n": len(labels), "majority": majority,
                      "spec": alts[0].to_dict() if len(alts) == 1 else [s.to_dict() for s in alts],
                      "gram_seconds": round(sum(secs[h] for h in bases), 2),
                      "tiles_computed": sum(tiles[h] for h in bases),
                      "learn_seconds": learn_s})
            rows.append(r)
            say(f"{word} {name}: accuracy {100 * r['accuracy']:.1f} (+- {100 * r['accuracy_std']:.1f})")
        say(f"{word}: learning {learn_s:.0f} s (every kernel's fits together); done in "
            f"{time.perf_counter() - t_word:.0f} s")
    wall = time.perf_counter() - t_all
    (out / "results.json").write_text(json.dumps(rows, indent=1, default=json_default))
    (out / "results.md").write_text(report(rows, cfg, wall))
    say(f"wrote {out / 'results.json'} and {out / 'results.md'} in {wall:.0f} s")
    return rows


def choose(sources, labels, train, p) -> tuple:
    """(alternative index, C) with the best pooled accuracy over ``p["inner_splits"]`` inner
    stratified folds of ``train`` (ties: the earlier alternative, then the earlier C of the list).

    Only ``train`` is read: the outer test fold never influences the choice.
    """

    if len(sources) == 1 and len(p["C"]) == 1:
        return 0, p["C"][0]
    y = [labels[i] for i in train]
    inner = stratified_kfold(y, p["inner_folds"], p["seed"])[: p.get("inner_splits", 1)]
    splits = [Split(train[s.train], train[s.test], "inner") for s in inner]
    ev = selection.evaluate(make("svm"), list(sources), labels, splits, {"C": list(p["C"])},
                            class_weight=p["class_weight"], multiclass=p["multiclass"])
    point = selection.best(ev.rows, ev.points, "accuracy", ties="first")
    return point.get("alternative", 0), float(point["C"])


def choose_C(source, labels, train, p) -> float:
    """C of the grid with the best inner accuracy on ``train`` (:func:`choose` with one alternative)."""
    return choose([source], labels, train, p)[1]


def nested_evaluate(source, labels, splits, p, name, cluster=None) -> dict:
    """Pooled k-fold accuracy with C (and, given a list of sources, the alternative) chosen per
    fold on its training part (as :func:`choose`): :func:`learn` of one kernel.

    Returns one result row: ``accuracy`` (pooled over folds), ``accuracy_std`` (over folds),
    ``macro_f1``, ``C`` (the per-fold choices), ``alternative`` (per-fold choices, for a list of
    sources) and the per-fold accuracies.
    """

    sources = list(source) if isinstance(source, (list, tuple)) else [source]
    return learn({name: sources}, labels, splits, p, cluster=cluster)[name]


def learn(systems: dict, labels, splits, p, cluster=None) -> dict:
    """:func:`nested_evaluate` of every system ``{name: [kernel source per alternative]}``, each
    through the one selection loop (:func:`gramtile.pipeline.learn.selection.evaluate`): for each
    outer fold, every (alternative, C) is fitted on the first ``p["inner_splits"]`` inner folds
    of its training part and the best by pooled inner accuracy is chosen (ties: the earlier
    alternative, then the earlier C), then fitted on the whole training part and scored on the
    test fold. Every fit is a task on ``cluster``; a store-backed source travels as store paths
    (the worker reads its own blocks), an in-memory one as it is. The results, and so
    ``results.json``, are those of the serial run.

    Returns
    -------
    dict name -> result row (as :func:`nested_evaluate`)
    """

    y = np.asarray(labels)
    out = {}
    for name, srcs in systems.items():
        ev = selection.evaluate(make("svm"), list(srcs), y, splits, {"C": list(p["C"])}, kernel=name,
                                class_weight=p["class_weight"], multiclass=p["multiclass"], select="nested",
                                inner_folds=p["inner_folds"], inner_seed=p["seed"],
                                inner_use=p.get("inner_splits", 1), ties="first", cluster=cluster)
        chosen = ev.chosen or ev.points * len(splits)
        (key, (idx, pred)), = ev.predictions.items()
        row = {"kernel": name, "model": "svm", "C": [float(c["C"]) for c in chosen], "multiclass": p["multiclass"],
               "splits": len(splits), "n_test": int(idx.size), "accuracy": float(np.mean(y[idx] == pred)),
               "accuracy_std": ev.rows[0]["accuracy_std"], "fold_accuracy": [r["accuracy"] for r in ev.fold_rows],
               "macro_f1": ev.reports[key].get("macro_f1")}
        if len(srcs) > 1:
            row["alternative"] = [c.get("alternative", 0) for c in chosen]
        out[name] = row
    return out


def report(rows, cfg, wall: float) -> str:
    """Markdown table: kernels down, words across (accuracy % +- fold std), baselines below."""
    words = [w for w in cfg["words"] if any(r["word"] == w for r in rows)]
    names = list(dict.fromkeys(r["kernel"] for r in rows))
    cell = {(r["word"], r["kernel"]): r for r in rows}
    p = cfg["protocol"]
    lines = [f"# {cfg['title']}\n",
             f"{p['folds']}-fold stratified cross-validation (seed {p['seed']}), SVM ({p['multiclass']}) with "
             + (f"C = {p['C'][0]:g}" if len(p["C"]) == 1 else
                f"C from {p['C']} chosen per fold on an inner split of its training part")
             + f"; accuracy % (+- std over folds); wall time {wall:.0f} s.\n",
             "| kernel | " + " | ".join(words) + " |", "|---|" + "---|" * len(words)]
    for k in names:
        cells = []
        for w in words:
            r = cell.get((w, k))
            cells.append("" if r is None else f"{100 * r['accuracy']:.1f} +- {100 * r['accuracy_std']:.1f}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    ns = {w: next(r["n"] for r in rows if r["word"] == w) for w in words}
    lines.append("| majority class (this data) | " + " | ".join(
        f"{100 * next(r['majority'] for r in rows if r['word'] == w):.1f}" for w in words) + " |")
    if cfg["baselines"]:
        lines.append("| majority class (data README) | " + " | ".join(str(cfg["baselines"].get(w, "")) for w in words)
                     + " |")
    if cfg["published"]:
        lines.append("| published | " + " | ".join(str(cfg["published"].get(w, "")) for w in words) + " |")
    lines.append("| instances | " + " | ".join(str(ns[w]) for w in words) + " |")
    return "\n".join(lines) + "\n"

