"""Workflow files (``gramtile run NAME --data DIR --out DIR`` or ``gramtile run FILE.yaml --out DIR``): schema, validation and runner.

A workflow names the data, the representations to keep, the kernels (by name), the protocol
and the report; :func:`run_workflow` wires prepare -> Gram stores -> evaluation -> report::

    name: num_qc
    data:
      train: ${SHARED}/trec_qc_num_constituency/NUM_train.dat   # or `input:` for k-fold on one file
      test: ${SHARED}/trec_qc_num_constituency/NUM_test.dat     # fixed split train -> test
      format: svmlighttk
      representations: [tree]        # optional: keep only these structures
      limit: {train: 300, test: 100} # optional: first examples only (quick runs)
    kernels:
      ST: {kind: normalized, kernel: {kind: st, lam: 0.4}}
    protocol:
      split: fixed                   # fixed (needs data.test) | kfold
      folds: 5                       # kfold only
      seed: 0
      model: svm                     # svm | perceptron | nystroem, or a list of them
      landmarks: 500                 # nystroem: landmarks per split (stratified, seeded)
      select_C: {folds: 3, metric: accuracy}  # svm: pick C from the C list by k-fold inside each training part
      C: svmlight                    # a number, a list (grid), or svmlight = 1 / mean K(x, x) of train
      class_weight: none             # none | balanced | {LABEL: weight}
      multiclass: ovr                # ovr | ovo
      positive: null                 # positive class of a binary task (default +1 / 1 / larger)
      epochs: 2                      # perceptron
    report:
      plot: true                     # accuracy bar chart (results.png)
      title: NUM vs rest

A relative path starts at the workflow file's own folder. ``${DATA}`` (and its older name
``${SHARED}``, which the shipped files use) expands to the data folder :func:`data_dir`:
``gramtile run ... --data DIR`` or ``$GRAMTILE_DATA``, else ``../shared/data`` beside a checkout.
Shipped files run by name (``gramtile run num_qc``, :func:`find_workflow`). Every kernel is computed as its distinct *base*
kernels, one Gram store each (``DIR/gram-<hash>.zarr``, symmetric over train + test); normalised
and composite kernels are derived from those stores without recomputing a pair. Rerunning the
same command reuses the corpus store and every finished tile (resumable).
"""
from __future__ import annotations

import importlib
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
import yaml

from gramtile.kernels.errors import GramtileError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline import optional
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.executors import SequentialExecutor
from gramtile.pipeline.compute.prepare import write_shards
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.crossval import evaluate, evaluate_nystroem, prediction_scores
from gramtile.pipeline.learn.folds import fixed_split, load_or_make_folds
from gramtile.pipeline.learn.metrics import positive_class
from gramtile.pipeline.learn.report import markdown_table
from gramtile.pipeline.learn.sources import ViewKernelSource
from gramtile.pipeline.parsing.convert import available, complete
from gramtile.pipeline.parsing.formats import FORMATS, read
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.errors import WorkflowError

#: The shipped workflow files (``gramtile run NAME``): this package's folder.
WORKFLOWS_DIR = Path(__file__).resolve().parent
#: The repository root when gramtile runs from a checkout (it holds pyproject.toml), else None.
CHECKOUT = WORKFLOWS_DIR.parent if (WORKFLOWS_DIR.parent / "pyproject.toml").is_file() else None
_TOP = {"name", "description", "data", "kernels", "protocol", "report"}
_DATA = {"input", "train", "test", "format", "representations", "limit", "reader_options", "model"}
_PROTOCOL = {"split", "folds", "seed", "model", "C", "class_weight", "multiclass", "positive", "epochs",
             "perceptron_seed", "landmarks", "select_C"}
MODELS = ("svm", "perceptron", "nystroem")
_REPORT = {"plot", "title", "columns"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def data_dir() -> Path | None:
    """The data folder ``${DATA}`` (and ``${SHARED}``) expand to: ``$GRAMTILE_DATA`` (what
    ``gramtile run --data DIR`` sets), else ``$GRAMTILE_SHARED`` (its older name), else
    ``../shared/data`` beside a checkout; None when gramtile is installed and neither is set."""
    for var in ("GRAMTILE_DATA", "GRAMTILE_SHARED"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    return None if CHECKOUT is None else CHECKOUT.parent / "shared" / "data"


def shipped_workflows() -> dict:
    """The workflow files shipped with gramtile, ``{name: path}`` (``gramtile run --list``)."""
    return {p.stem: p for p in sorted(WORKFLOWS_DIR.glob("*.yaml"))}


def find_workflow(name_or_path) -> Path:
    """A workflow file given by path, or by the name of a shipped one (``num_qc``)."""
    p = Path(name_or_path).expanduser()
    if p.is_file():
        return p
    shipped = shipped_workflows()
    name = p.name[:-5] if p.name.endswith(".yaml") else p.name
    if name in shipped and (len(p.parts) == 1 or p.parent.name == "workflows"):
        return shipped[name]
    raise WorkflowError(f"{name_or_path}: no such workflow file, and no shipped workflow of that name; the shipped "
                        f"ones are {sorted(shipped)} (`gramtile run --list`)")


@dataclass
class Workflow:
    """A validated workflow file."""

    path: Path
    name: str
    data: dict
    kernels: dict          # name -> KernelSpec
    protocol: dict
    report: dict = field(default_factory=dict)
    description: str = ""

    @property
    def fixed(self) -> bool:
        return self.protocol["split"] == "fixed"


@dataclass
class RecipeWorkflow:
    """A workflow run by Python code: ``recipe: package.module:function`` in the YAML file.

    For tasks the declarative schema cannot express (several binary tasks from one corpus,
    feature baselines, task-specific scores). The function is called as
    ``function(raw, path, out, cluster=, tile=)`` with the whole YAML
    mapping ``raw``; it validates its own keys and returns result rows (dicts). Example:
    ``workflows/conll04_relations.yaml`` (recipe ``gramtile.workflows.recipes.relations:run``).
    """

    path: Path
    name: str
    raw: dict
    function: object

    @classmethod
    def from_raw(cls, path, raw: dict) -> RecipeWorkflow:

        ref = raw["recipe"]
        mod, _, fn = ref.partition(":") if isinstance(ref, str) else ("", "", "")
        try:
            func = getattr(importlib.import_module(mod), fn) if mod and fn else None
        except (ImportError, AttributeError):
            func = None
        if not callable(func):
            raise_bad_key(path, "recipe", ref, "name an importable function as package.module:function, e.g. "
                  "gramtile.workflows.recipes.relations:run")
        return cls(path=Path(path), name=str(raw.get("name") or Path(path).stem), raw=raw, function=func)

    def run(self, out, **kwargs) -> list:
        return self.function(self.raw, self.path, out, **kwargs)


def raise_bad_key(path, key, value, fix):
    raise WorkflowError(f"{path}: key '{key}' = {value!r}: {fix}")


def _unknown(path, where, obj, allowed):
    for k in obj:
        if k not in allowed:
            raise_bad_key(path, f"{where}{k}", obj[k], f"unknown key; allowed keys here are {sorted(allowed)}")


def resolve_path(path, key, text) -> Path:
    """The file a workflow key names: ``${DATA}``/``${SHARED}`` expand to :func:`data_dir`, other
    ``${VAR}`` to environment variables; a relative path starts at the workflow file's folder."""
    if not isinstance(text, str) or not text.strip():
        raise_bad_key(path, key, text, "give a file path (relative to the workflow file's folder, absolute, "
                                       "or ${DATA}/...)")

    def sub(m):
        if m.group(1) in ("DATA", "SHARED"):
            d = data_dir()
            if d is None:
                raise_bad_key(path, key, text, f"${{{m.group(1)}}} is the data folder, and none is set; pass "
                                               "`gramtile run ... --data DIR` (or set $GRAMTILE_DATA)")
            return str(d)
        if m.group(1) in os.environ:
            return os.environ[m.group(1)]
        raise_bad_key(path, key, text, f"unknown variable ${{{m.group(1)}}}; use ${{DATA}} (the --data folder) "
                                       "or an environment variable")

    p = Path(_VAR.sub(sub, text)).expanduser()
    p = p if p.is_absolute() else Path(path).resolve().parent / p
    if not p.exists():
        raise_bad_key(path, key, text, f"{p} does not exist; fix the path" +
                      (" or --data" if _VAR.search(text) else ""))
    return p


def parse_kernels(path, kernels, reps=None) -> dict:
    """The ``kernels:`` mapping of a workflow file as ``{name: spec}``; with ``reps``, every base
    kernel must read one of those representations. Errors name the file and the key."""

    if not isinstance(kernels, dict) or not kernels:
        raise_bad_key(path, "kernels", kernels, "a mapping name -> kernel spec, e.g. {SST: {kind: sst, lam: 0.4}}")
    specs = {}
    for name, s in kernels.items():
        try:
            specs[str(name)] = as_spec(s)
        except (GramtileError, TypeError, ValueError, KeyError) as e:
            raise_bad_key(path, f"kernels.{name}", s, f"not a valid kernel spec ({e})")
        if reps is not None:
            for r in specs[str(name)].reps():
                if r not in reps:
                    raise_bad_key(path, f"kernels.{name}", s, f"reads representation {r!r}, which "
                          f"data.representations {reps} leaves out; add it there or set the spec's 'rep'")
    return specs


def _positive_number(path, key, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or not math.isfinite(v):
        raise_bad_key(path, key, v, "must be a positive finite number")
    return float(v)


def load_workflow(path) -> Workflow:
    """Read and validate a workflow YAML file.

    Raises
    ------
    WorkflowError
        Naming the file, the key, the offending value and the fix.
    """


    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise WorkflowError(f"{path}: cannot read the workflow file ({e.strerror}); pass an existing YAML file") \
            from None
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise WorkflowError(f"{path}" + (f", line {line + 1}" if line is not None else "") +
                            f": not valid YAML ({getattr(e, 'problem', e)}); fix the syntax") from None
    if not isinstance(raw, dict):
        raise_bad_key(path, "(top level)", raw, "a workflow is a mapping with keys data, kernels, protocol")
    if "recipe" in raw:
        return RecipeWorkflow.from_raw(path, raw)
    _unknown(path, "", raw, _TOP)
    for k in ("data", "kernels"):
        if k not in raw:
            raise_bad_key(path, k, None, f"missing; every workflow needs '{k}' (see gramtile.workflows.runner)")
    data = raw["data"]
    if not isinstance(data, dict):
        raise_bad_key(path, "data", data, "must be a mapping with input|train[, test] and format")
    _unknown(path, "data.", data, _DATA)
    fmt = data.get("format")
    if fmt not in FORMATS:
        raise_bad_key(path, "data.format", fmt, f"use one of {sorted(FORMATS)}")
    d = {"format": fmt, "reader_options": dict(data.get("reader_options") or {}), "model": data.get("model")}
    if "input" in data:
        if "train" in data or "test" in data:
            raise_bad_key(path, "data.input", data["input"], "give either 'input' (one file, k-fold) or 'train' + 'test'")
        d["inputs"] = {"all": resolve_path(path, "data.input", data["input"])}
    elif "train" in data:
        d["inputs"] = {"train": resolve_path(path, "data.train", data["train"])}
        if "test" in data:
            d["inputs"]["test"] = resolve_path(path, "data.test", data["test"])
    else:
        raise_bad_key(path, "data.input", None, "missing; name the data file ('input') or 'train' and 'test'")
    reps = data.get("representations")
    if reps is not None and (not isinstance(reps, list) or not reps or not all(isinstance(r, str) for r in reps)):
        raise_bad_key(path, "data.representations", reps, "a list of structure names, e.g. [grct, bow]")
    d["representations"] = reps
    limit = data.get("limit")
    if limit is not None:
        if isinstance(limit, int) and not isinstance(limit, bool):
            limit = {k: limit for k in d["inputs"]}
        if not isinstance(limit, dict):
            raise_bad_key(path, "data.limit", limit, "a positive integer or a mapping part -> integer, e.g. {train: 300}")
        for k, v in limit.items():
            if k not in d["inputs"]:
                raise_bad_key(path, f"data.limit.{k}", v, f"no such data part; the parts are {sorted(d['inputs'])}")
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise_bad_key(path, f"data.limit.{k}", v, "must be a positive integer")
    d["limit"] = limit or {}

    specs = parse_kernels(path, raw["kernels"], reps)

    proto = raw.get("protocol") or {}
    if not isinstance(proto, dict):
        raise_bad_key(path, "protocol", proto, "a mapping (split, folds, model, C, ...)")
    _unknown(path, "protocol.", proto, _PROTOCOL)
    p = {}
    p["split"] = proto.get("split", "fixed" if "test" in d["inputs"] else "kfold")
    if p["split"] not in ("fixed", "kfold"):
        raise_bad_key(path, "protocol.split", p["split"], "use 'fixed' (train -> test) or 'kfold'")
    if p["split"] == "fixed" and "test" not in d["inputs"]:
        raise_bad_key(path, "protocol.split", "fixed", "a fixed split needs data.train and data.test; or use split: kfold")
    p["folds"] = proto.get("folds", 5)
    if isinstance(p["folds"], bool) or not isinstance(p["folds"], int) or p["folds"] < 2:
        raise_bad_key(path, "protocol.folds", p["folds"], "must be an integer >= 2")
    for k in ("seed", "perceptron_seed"):
        v = proto.get(k, 0 if k == "seed" else None)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise_bad_key(path, f"protocol.{k}", v, "must be an integer")
        p[k] = v
    models = proto.get("model", "svm")
    models = [models] if isinstance(models, str) else models
    if not isinstance(models, list) or not models or any(m not in MODELS for m in models):
        raise_bad_key(path, "protocol.model", proto.get("model"), f"use one of {list(MODELS)} or a list of them")
    p["models"] = models
    sel = proto.get("select_C")
    if sel is not None:
        if not isinstance(sel, dict) or set(sel) - {"folds", "metric"}:
            raise_bad_key(path, "protocol.select_C", sel, "a mapping with folds (>= 2) and metric (accuracy, f1, macro_f1)")
        sel = {"folds": sel.get("folds", 3), "metric": sel.get("metric", "accuracy")}
        if isinstance(sel["folds"], bool) or not isinstance(sel["folds"], int) or sel["folds"] < 2:
            raise_bad_key(path, "protocol.select_C.folds", sel["folds"], "must be an integer >= 2")
        if sel["metric"] not in ("accuracy", "f1", "macro_f1"):
            raise_bad_key(path, "protocol.select_C.metric", sel["metric"], "use accuracy, f1 or macro_f1")
    p["select_C"] = sel
    p["landmarks"] = proto.get("landmarks", 500)
    if isinstance(p["landmarks"], bool) or not isinstance(p["landmarks"], int) or p["landmarks"] < 1:
        raise_bad_key(path, "protocol.landmarks", p["landmarks"], "must be an integer >= 1 (Nystroem landmarks per split)")
    C = proto.get("C", 1.0)
    if C == "svmlight":
        p["C"] = "svmlight"
    else:
        Cs = C if isinstance(C, list) else [C]
        if not Cs:
            raise_bad_key(path, "protocol.C", C, "give a number, a list of numbers, or 'svmlight'")
        p["C"] = [_positive_number(path, "protocol.C", c) for c in Cs]
    cw = proto.get("class_weight", None)
    if cw in (None, "none"):
        cw = None
    elif cw == "balanced":
        pass
    elif isinstance(cw, dict):
        cw = {str(k): _positive_number(path, f"protocol.class_weight.{k}", v) for k, v in cw.items()}
    else:
        raise_bad_key(path, "protocol.class_weight", cw, "use none, balanced or a mapping LABEL: weight")
    p["class_weight"] = cw
    if p["select_C"] is not None and (p["C"] == "svmlight" or len(p["C"]) < 2):
        raise_bad_key(path, "protocol.select_C", proto.get("select_C"), "needs a list of at least two C values in protocol.C")
    p["multiclass"] = proto.get("multiclass", "ovr")
    if p["multiclass"] not in ("ovr", "ovo"):
        raise_bad_key(path, "protocol.multiclass", p["multiclass"], "use ovr (one-vs-rest) or ovo (one-vs-one)")
    p["positive"] = None if proto.get("positive") is None else str(proto["positive"])
    p["epochs"] = proto.get("epochs", 2)
    if isinstance(p["epochs"], bool) or not isinstance(p["epochs"], int) or p["epochs"] < 1:
        raise_bad_key(path, "protocol.epochs", p["epochs"], "must be an integer >= 1")

    report = raw.get("report") or {}
    if not isinstance(report, dict):
        raise_bad_key(path, "report", report, "a mapping (plot, title, columns)")
    _unknown(path, "report.", report, _REPORT)
    return Workflow(path=path, name=str(raw.get("name") or path.stem), data=d, kernels=specs, protocol=p,
                    report=report, description=str(raw.get("description") or ""))


# ---- corpus ---------------------------------------------------------------------------------

def _documents(wf: Workflow):
    """The examples in corpus order (train then test, or the one input), and the part sizes."""


    reps = wf.data["representations"]

    def keep(docs):
        for doc in docs:
            if reps is not None and doc.structures:
                can = available(doc.structures)
                missing = [r for r in reps if r not in can]
                if missing:
                    raise WorkflowError(f"{wf.path}: key 'data.representations' = {reps!r}: example {doc.id} "
                                        f"({doc.source}) has no {missing[0]!r} (it has {sorted(doc.structures)}, "
                                        f"and can be given {can}); name representations the data can have")
                # derived where missing: tree/ptree/seq of a dependency tree, ptree of a tree (as prepare --reps)
                doc.structures = complete(doc.structures, reps)
            yield doc

    for part, p in wf.data["inputs"].items():
        docs = read(p, wf.data["format"], **wf.data["reader_options"])
        n = wf.data["limit"].get(part)
        yield part, keep(islice(docs, n) if n else docs)


def build_corpus(wf: Workflow, out: Path, cluster=None):
    """Write (or reuse / resume) the corpus store ``out`` of a workflow's data, train part first
    (in this process; ``cluster``, a Runtime, gives the run's settings: its progress bar).

    Returns
    -------
    (CorpusStore, dict part -> (start, stop))
    """

    parts_file = out.parent / (out.name + ".parts.json")
    source = json.dumps({k: str(v) for k, v in wf.data["inputs"].items()}, sort_keys=True)
    options = {"limit": wf.data["limit"], "representations": wf.data["representations"],
               "reader_options": wf.data["reader_options"]}
    if out.exists():
        store = CorpusStore.open(out)
        m = store.manifest
        if m["source"] != source or m["input_format"] != wf.data["format"] or m.get("options") != \
                json.loads(json.dumps(options)):
            raise WorkflowError(f"{wf.path}: the corpus store {out} was made from other data "
                                f"({m['source']}, format {m['input_format']}, options {m.get('options')}); "
                                f"use another --out, or delete {out} to rebuild it")
        if store.complete and parts_file.exists():
            return store, {k: tuple(v) for k, v in json.loads(parts_file.read_text()).items()}
        store = CorpusStore.open(out, "r+")
    else:
        store = CorpusStore.create(out, source=source, input_format=wf.data["format"], shard_size=1000,
                                   options=options)
    parts, counts = {}, {}
    try:
        def stream():
            start = 0
            for part, docs in _documents(wf):
                k = 0
                for doc in docs:
                    k += 1
                    yield doc
                counts[part] = (start, start + k)
                start += k

        if not store.complete:
            run = store.begin_run({"cluster": "sequential", "workflow": str(wf.path)})
            # model None: the default one, looked up only if a text needs parsing
            write_shards(store, stream(), SequentialExecutor(), run, wf.data.get("model"), False,
                         Runtime.of(cluster).progress, None)
            store.finish()
        else:
            for _ in stream():
                pass
        parts = counts
    finally:
        store.close()
    parts_file.write_text(json.dumps(parts))
    return CorpusStore.open(out), parts


# ---- running ---------------------------------------------------------------------------------

def svmlight_C(source, train) -> float:
    """SVM-Light's default C: 1 / mean K(x, x) over the training examples (1 for a normalised kernel)."""
    tr = np.asarray(train, dtype=np.int64)
    # diagonal blocks only: the chunks on the diagonal, not the whole train x train block
    d = np.concatenate([source.block(tr[a:a + 512], tr[a:a + 512]).diagonal() for a in range(0, tr.size, 512)])
    m = float(np.mean(d))
    if not m > 0:
        raise WorkflowError("C: svmlight needs a positive mean self-kernel over the training examples; give C")
    return 1.0 / m


def base_stores(wf: Workflow, corpus, out: Path, cluster="local", tile=None) -> tuple[dict, dict]:
    """Compute (or resume) one symmetric Gram store per distinct base kernel of the workflow.

    Returns (spec_hash -> GramStore, spec_hash -> seconds spent computing it this run).
    """

    bases = {}
    for spec in wf.kernels.values():
        for b in spec.base_specs():
            bases.setdefault(b.spec_hash, b)
    stores, seconds = {}, {}
    for h, b in bases.items():
        path = out / f"gram-{b.kind}-{h[:12]}.zarr"
        t0 = time.perf_counter()
        run_gram(corpus, b, path, tile=tile, cluster=cluster)
        seconds[h] = time.perf_counter() - t0
        stores[h] = GramStore.open(path)
    return stores, seconds


def run_workflow(wf, out, cluster: str = "local", tile=None, solver: str = "auto") -> list[dict]:
    """Run a workflow end to end and write ``out/results.json``, ``out/results.md`` and plots.

    Parameters
    ----------
    wf : Workflow or path
    out : path
        Output folder; its corpus and Gram stores are reused by a rerun.
    cluster : str or Runtime
        As for :func:`~gramtile.pipeline.compute.engine.run_gram`; the Gram stores and the
        learning fits of a kernel x model (its splits) run on one cluster opened for the whole
        workflow (results are the serial run's); its settings (progress, memory_mb, cache_mb,
        scratch) apply to every step.
    tile : int, optional
        Tile edge of new Gram stores.
    solver
        The SVM solver of the learn steps (:func:`~gramtile.pipeline.learn.crossval.plan_solver`).
        Recipe workflows (``recipe:``) keep their own protocols; the wsd, relations and qc_hdag
        recipes run their fits as tasks on ``cluster`` too (with the default solver).

    Returns
    -------
    list of dict
        Result rows, one per kernel x model x setting.
    """

    if not isinstance(wf, (Workflow, RecipeWorkflow)):
        wf = load_workflow(wf)
    if isinstance(wf, RecipeWorkflow):
        return wf.run(out, cluster=cluster, tile=tile)
    if wf.report.get("plot", True):
        optional.require("plots", then=f", or set report: {{plot: false}} in {wf.path}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    say = lambda s: log.info(f"gramtile run: {s}")  # noqa: E731
    corpus, parts = build_corpus(wf, out / "corpus.zarr", cluster)
    labels = corpus.labels
    say(f"corpus {out / 'corpus.zarr'}: {corpus.n} examples ({', '.join(f'{k} {b - a}' for k, (a, b) in parts.items())})")
    p = wf.protocol
    if wf.fixed:
        (a, b), (c, d) = parts["train"], parts["test"]
        splits = [fixed_split(np.arange(a, b), np.arange(c, d), corpus.n)]
        how = f"train {b - a} -> test {d - c}"
    else:
        splits = load_or_make_folds(out, labels, p["folds"], p["seed"])
        how = f"{p['folds']}-fold (seed {p['seed']})"
    for i, y in enumerate(labels):
        if y is None or isinstance(y, list):
            raise WorkflowError(f"{wf.path}: example {corpus.ids[i]} has label {y!r}; workflows need one label "
                                "per example")
    with Runtime.of(cluster) as rt:
        stores, seconds = base_stores(wf, corpus, out, rt, tile)
        learn = dict(solver=solver, cluster=rt)
        rows = _learn(wf, stores, seconds, labels, splits, p, say, learn)
    return _report(wf, rows, corpus, how, out, say, t_start)


def _learn(wf, stores, seconds, labels, splits, p, say, learn) -> list:
    """Every kernel x model of the workflow's protocol: its result rows."""
    rows = []
    for name, spec in wf.kernels.items():
        source = ViewKernelSource(ComposedView(spec, stores))
        t0 = time.perf_counter()
        for model in p["models"]:
            C = p["C"]
            if model != "perceptron" and C == "svmlight":
                C = [svmlight_C(source, splits[0].train)]
            if model == "nystroem":

                ny = evaluate_nystroem(source, labels, splits, m=p["landmarks"], C=C, seed=p["seed"],
                                       class_weight=p["class_weight"], kernel=name, positive=p["positive"],
                                       cluster=learn.get("cluster"))
                for r in ny:
                    r.pop("predictions")
                    r.update(spec=spec.to_dict(), learn_seconds=round(time.perf_counter() - t0, 2),
                             gram_seconds=round(sum(seconds[b.spec_hash] for b in spec.base_specs()), 2))
                rows.extend(ny)
                say(f"{name} nystroem: " + ", ".join(f"C={r['C']} accuracy {r['accuracy']:.4f}" for r in ny))
                continue
            if model == "svm" and p["select_C"] is not None:
                rows.append(_selected_C_row(source, labels, splits, C, p, name, spec, learn))
                say(f"{name} svm, C chosen in the training part(s) {rows[-1]['C_chosen']}: "
                    f"accuracy {rows[-1]['accuracy']:.4f}")
                continue
            ev = evaluate(source, labels, splits, model=model, C=C if model == "svm" else (1.0,),
                          class_weight=p["class_weight"] if model == "svm" else None, multiclass=p["multiclass"],
                          epochs=p["epochs"], seed=p["perceptron_seed"], kernel=name, positive=p["positive"],
                          **learn)
            for r in ev.rows:
                r["spec"] = spec.to_dict()
                r["gram_seconds"] = round(sum(seconds[b.spec_hash] for b in spec.base_specs()), 2)
                r["learn_seconds"] = round(time.perf_counter() - t0, 2)
                if wf.fixed:
                    r["n_train"] = int(splits[0].train.size)
            rows.extend(ev.rows)
            say(f"{name} {model}: " + ", ".join(f"C={r['C']} accuracy {r['accuracy']:.4f}" for r in ev.rows))
    return rows


def _report(wf, rows, corpus, how, out, say, t_start):
    cols = wf.report.get("columns") or [c for c in ("kernel", "model", "C", "m", "class_weight", "multiclass", "n_train",
                                                    "n_test", "accuracy", "precision", "recall", "f1", "macro_f1")
                                        if any(r.get(c) is not None for r in rows)]
    table = markdown_table(rows, columns=cols)
    (out / "results.json").write_text(json.dumps(rows, indent=1, default=json_default))
    title = wf.report.get("title") or wf.name
    md = [f"# {title}\n", f"Workflow `{wf.path.name}`: {corpus.n} examples, {how}, "
          f"format {wf.data['format']}.\n", table, ""]
    if wf.report.get("plot", True) and rows:
        plot_results(rows, out / "results.png", title)
        md.append("![accuracy](results.png)\n")
    (out / "results.md").write_text("\n".join(md))
    say(f"wrote {out / 'results.json'} and {out / 'results.md'} in {time.perf_counter() - t_start:.1f} s")
    return rows


def _selected_C_row(source, labels, splits, Cs, p, name, spec, learn=None) -> dict:
    """Nested model selection: for each split, C from ``Cs`` by k-fold inside its training part,
    then train on the whole training part and test; predictions pooled over splits. The splits
    are tasks of :func:`~gramtile.pipeline.learn.crossval.evaluate` (``learn``: its solver and
    cluster options)."""

    y = np.asarray(labels)
    ev = evaluate(source, labels, splits, model="svm", C=list(Cs), class_weight=p["class_weight"],
                  multiclass=p["multiclass"], kernel=name, positive=p["positive"], select="nested",
                  inner_folds=p["select_C"]["folds"], inner_seed=p["seed"], inner_metric=p["select_C"]["metric"],
                  **(learn or {}))
    chosen = [r["C_chosen"] for r in ev.fold_rows]
    idx, pred = next(iter(ev.predictions.values()))
    classes = sorted(np.unique(y).tolist())
    positive = p["positive"] or (positive_class(classes) if len(classes) == 2 else None)
    row, _ = prediction_scores(y[idx], pred, classes, positive)
    return {"kernel": name, "model": "svm", "C": chosen[0] if len(set(chosen)) == 1 else None,
            "C_chosen": chosen, "C_grid": list(Cs), "select_C": p["select_C"],
            "class_weight": p["class_weight"] if not isinstance(p["class_weight"], dict) else
            ",".join(f"{k}:{v:g}" for k, v in p["class_weight"].items()),
            "splits": len(splits), "n_test": int(idx.size), **row, "spec": spec.to_dict()}


def json_default(v):
    """``json.dumps`` fallback of the result files: numpy scalars and arrays, else ``str``."""
    if hasattr(v, "item"):
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    return str(v)


def plot_results(rows, path, title: str) -> None:
    """A horizontal bar chart of accuracy per (kernel, model, C) row."""
    plt = optional.pyplot()

    labs = [f"{r['kernel']} {r['model']}" + (f" C={r['C']:g}" if r.get("C") is not None else "") for r in rows]
    acc = [100 * r["accuracy"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.4 * len(rows)), dpi=100)
    ax.barh(range(len(rows)), acc)
    ax.set_yticks(range(len(rows)), labs, fontsize="small")
    ax.invert_yaxis()
    lo = max(0.0, min(acc) - 10)
    ax.set_xlim(lo, 100)
    for i, a in enumerate(acc):
        ax.text(a, i, f" {a:.1f}", va="center", fontsize="small")
    ax.set_xlabel("accuracy (%)")
    ax.set_title(title, fontsize="medium")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
