"""Saved kernel models: train once, predict on new examples evaluating the kernel against the
support vectors only.

A model directory holds

- ``model.json``: format version, the kernel spec (JSON) and its hash, the learner (``svm``,
  ``perceptron``, ``svr``, ``rank``, ...) and its parameters, the ``task`` it learnt
  (``classification``, ``regression``, ``ranking``), the scheme (``binary``, ``ovr``, ``ovo``;
  ``single`` for the one real-valued function of a regression or ranking), the label map
  (``classes``, empty for a regression or ranking), one *decision function* per binary
  sub-problem, the support examples' ids and
  the self-kernels of every base kernel over them, and provenance (corpus hash, gramtile
  version, date);
- ``support-<rep>.jsonl``: the support examples, one file per representation the kernel reads
  or builds a space from (``space_rep``, :func:`kernel_reps`), in the JSON-lines interchange
  format (docs/formats.md; the structure is written under its JSON-lines key and renamed back on
  load). A sparse bag (KeLP vector) is written as ``{"id", "bag"}``;
- ``resources.npz`` and ``resource-strings.json`` (format version 2, kernels that read corpus
  resources): the resources the kernel read at training (LSA soft-matching space, domain space,
  WordNet synonymy matrix) and the vocabulary strings indexing them, listed in ``model.json``
  with their content hashes (:func:`gramtile.pipeline.resources.build.content_hash`).

Corpus resources
----------------
A kernel with an LSA or domain space depends on the examples the space was built from, so the
model keeps the space it was trained with: the one built from the training examples (in-memory
:func:`train`, exactly those :func:`gramtile.gram` used for the training K) or the corpus store's
stored resource recorded by the Gram store (:func:`train_from_store`, loaded, never rebuilt).
Prediction encodes the test and support examples over a fresh vocabulary and maps the resources
onto it (:func:`gramtile.pipeline.resources.build.map_value`): a symbol seen at training keeps its
row; an unseen symbol is out of the space (a zero LSA / domain vector: in soft matching it then
matches only itself, since the kernel puts 1 on the diagonal; in the domain kernel it adds
nothing to its context's vector). So K(support, support) at prediction is the training K's, and
K(test, support) is the block of a Gram matrix over train + test with the training resources.
WordNet synonymy is a function of the two strings alone: it is rebuilt over the prediction
vocabulary (so unseen words keep their synonyms, as in :func:`gramtile.gram` over train + test)
and checked against the saved entries of the symbols seen at training (another WordNet database
is a :class:`StoreMismatchError`). Models of format version 1 carry no resources: those of LSA /
domain kernels cannot be loaded (retrain), WordNet ones rebuild the matrix as before.

A decision function is ``f(x) = sum_s coef[s] K(x, sv[s]) + intercept`` over positions ``sv``
into the support set (SVM), or a voted-perceptron mistake sequence. Schemes:

- ``binary``: one function; ``f > 0`` predicts ``classes[1]`` (scikit-learn's ``SVC``
  convention; for the perceptron the positive class is stored explicitly);
- ``ovr``: one function per class, the largest wins (ties: the later class, as
  ``OneVsRestClassifier``; the perceptron's: the first);
- ``ovo``: one function per class pair (i, j), i < j, in scikit-learn's order; ``f > 0`` votes
  for i; most votes wins, ties to the lower class index (libsvm). The pair's coefficients are
  read from ``SVC.dual_coef_``: for support vectors of class i row j - 1, for those of class j
  row i (libsvm's layout);
- ``single``: one real-valued function, the prediction itself: a regression's predicted target
  (SVR's dual coefficients and intercept; kernel ridge's, intercept 0), a ranking's score (higher
  ranks higher within a group; the preference ranker's pair multipliers summed per example,
  intercept 0).

Normalised kernels need K(sv, sv) for every support vector; they are stored (``sv_self``, per
base kernel) so prediction evaluates n_test x n_sv pairs plus the test self-kernels, nothing else.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from itertools import islice
from pathlib import Path

import numpy as np
from conllu.models import TokenList

from gramtile.kernels.registry import as_spec
from gramtile.kernels.spec import DEFAULT_REP
from gramtile.pipeline import optional
from gramtile.pipeline.compute.inmemory import batch_for, encode_with_resources, resources_for
from gramtile.pipeline.compute.prepare import PRETOKENIZED_FORMATS, needs_parse, texts_of
from gramtile.pipeline.learn.errors import EvaluationError, PredictInputError
from gramtile.pipeline.learn.learners.base import TASKS
from gramtile.pipeline.learn.perceptron import VotedPerceptron, binary_score
from gramtile.pipeline.learn.sources import ViewKernelSource
from gramtile.pipeline.parsing.convert import parse
from gramtile.pipeline.parsing.derive import derive_all
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.parsing.links import REP as LINKED
from gramtile.pipeline.parsing.links import with_links
from gramtile.pipeline.parsing.parse import is_spacy_doc, parse_derive_shard
from gramtile.pipeline.readers.jsonl import NAMES, read_jsonl, write_jsonl
from gramtile.pipeline.readers.labels import read_label_file
from gramtile.pipeline.readers.table import table_kind
from gramtile.pipeline.representations.encode import encode, kind_of
from gramtile.pipeline.representations.fields import field_key
from gramtile.pipeline.representations.structures import DepTree, Document
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.resources.build import ARRAY_NAMES, arrays_of, build_value, content_hash, map_value, value_of
from gramtile.pipeline.resources.keys import keys_of, resource_reps
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError, StoreMismatchError
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.integrity import (
    MANIFEST,
    check_manifest,
    clean_stale,
    publish_dir,
    temp_sibling,
    write_manifest,
)
from gramtile.pipeline.stores.resource_store import load

#: The one format of model directories (``model.json``), whatever the learner: its ``model`` field
#: says what it holds (``kernel``: this module; ``linear``: :mod:`.linear_models`)
FORMAT = "gramtile-model"
FORMAT_VERSION = 3
#: Kernel model directories this gramtile reads (version 1: no saved resources; 3: the ``model``
#: field, written for every learner's model).
READABLE_VERSIONS = (1, 2, 3)
MODEL_FILE = "model.json"
RESOURCES_FILE = "resources.npz"
STRINGS_FILE = "resource-strings.json"
#: the fix named when a model directory's files do not match their checksums
DAMAGED_FIX = ("train the model again (`gramtile train ... --out DIR --overwrite`), or restore the directory from a "
               "copy")
#: the fix named for a model directory written before its files had checksums
LEGACY_FIX = ("run `gramtile verify --repair {d}` to record the checksums of its files as they are now (if you trust "
              "them), or train the model again")


def kernel_reps(spec, spaces: bool = True) -> list:
    """Representations a spec needs from each example, sorted.

    Parameters
    ----------
    spec : KernelSpec
    spaces : bool
        Include the representations LSA / domain spaces are built from (``space_rep``,
        :func:`gramtile.pipeline.compute.inmemory.resource_reps`): needed to train and kept with the
        support examples; prediction, which reads the model's saved spaces, passes False.
    """

    reps = set(spec.reps())
    if spaces:
        reps |= {r for r in resource_reps(spec).values() if r is not None}
    return sorted(reps)


@dataclass
class TrainedResources:
    """The corpus resources a kernel read at training and the symbols indexing them.

    Attributes
    ----------
    strings : list of str
        Vocabulary (``sym``) strings in id order.
    values : dict
        Resource name -> value (scipy CSR matrix or ndarray factor) over ``strings``.
    """

    strings: list
    values: dict


@dataclass
class Predictions:
    """What a saved model says about examples (:meth:`SavedModel.predictions`,
    :meth:`~gramtile.pipeline.learn.linear_models.LinearModel.predictions`): the labels, the
    decision scores ((n,) for two classes, else (n, functions)) and one line saying what it took."""

    labels: np.ndarray
    scores: np.ndarray
    what: str


@dataclass
class SavedModel:
    """A trained kernel classifier over its support examples (see the module docstring).

    Attributes
    ----------
    spec : KernelSpec
    learner : {"svm", "perceptron", "nystroem", "ridge", "svr", "krr", "rank"}
        ``nystroem`` (:func:`gramtile.pipeline.learn.nystroem.train_nystroem`): the linear SVM on
        Nystroem features saved as an expansion over the landmarks (the support examples).
    scheme : {"binary", "ovr", "ovo", "single"}
    classes : list of str (empty for a regression or ranking)
    functions : list of dict
        SVM: ``{"sv": int positions, "coef": floats, "intercept": float}`` (+ ``"pair": [i, j]``
        for ovo). Perceptron: ``{"sv", "ylab", "counts"}`` (mistake sequence) and, for
        binary, the model-level ``params["positive"]``.
    support : list of Document
        The support examples (only the representations the kernel reads).
    sv_self : dict
        Base spec hash -> ndarray (n_sv,) of K_base(sv, sv).
    params : dict
        Learner parameters (C, class_weight, epochs, vote, positive, ...).
    provenance : dict
    resources : TrainedResources or None
        The corpus resources the kernel read at training (None: it reads none, or a format-1
        model of a WordNet kernel).
    task : {"classification", "regression", "ranking"}
        What the model predicts: labels, real targets, or scores to rank the candidates of a group by.
    """

    spec: object
    learner: str
    scheme: str
    classes: list
    functions: list
    support: list
    sv_self: dict
    params: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    resources: TrainedResources | None = None
    task: str = "classification"

    @property
    def n_support(self) -> int:
        return len(self.support)

    # ---- building ---------------------------------------------------------------------------

    @classmethod
    def from_estimator(cls, est, spec, train_docs, params=None, provenance=None,
                       resources: TrainedResources | None = None) -> SavedModel:
        """Extract a saved model from an estimator fitted on K(train, train).

        Parameters
        ----------
        est : sklearn.svm.SVC, OneVsRestClassifier of SVC, or VotedPerceptron
        spec : KernelSpec (or dict / JSON)
        train_docs : list of Document
            The training examples in the order of K's rows.
        resources : TrainedResources, optional
            The resources K was computed with; by default built from ``train_docs`` as
            :func:`gramtile.gram` over them builds them.
        """
        OneVsRestClassifier = optional.sklearn("multiclass").OneVsRestClassifier
        SVC = optional.sklearn("svm").SVC


        spec = as_spec(spec)
        params = dict(params or {})
        if isinstance(est, SVC):
            classes = [str(c) for c in est.classes_]
            sup = np.asarray(est.support_, dtype=np.int64)
            dc = np.asarray(est.dual_coef_, dtype=np.float64)
            b = np.asarray(est.intercept_, dtype=np.float64)
            if len(classes) == 2:
                scheme, funcs = "binary", [(sup, dc[0], float(b[0]))]
            else:
                scheme, funcs = "ovo", []
                starts = np.concatenate([[0], np.cumsum(est.n_support_)])
                p = 0
                for i in range(len(classes)):
                    for j in range(i + 1, len(classes)):
                        si = np.arange(starts[i], starts[i + 1])
                        sj = np.arange(starts[j], starts[j + 1])
                        coef = np.concatenate([dc[j - 1, si], dc[i, sj]])
                        funcs.append((sup[np.concatenate([si, sj])], coef, float(b[p]), [i, j]))
                        p += 1
            learner = "svm"
        elif isinstance(est, OneVsRestClassifier):
            classes = [str(c) for c in est.classes_]
            scheme, funcs, learner = "ovr", [], "svm"
            for e in est.estimators_:
                if not isinstance(e, SVC):
                    raise EvaluationError(f"one-vs-rest over {type(e).__name__}: only SVC can be saved")
                funcs.append((np.asarray(e.support_, np.int64), np.asarray(e.dual_coef_[0], np.float64),
                              float(e.intercept_[0])))
        elif isinstance(est, VotedPerceptron):
            classes = [str(c) for c in est.classes_]
            learner = "perceptron"
            scheme = "binary" if len(classes) == 2 else "ovr"
            funcs = [(np.asarray(idx, np.int64), np.asarray(ylab, np.float64), np.asarray(counts, np.int64))
                     for idx, ylab, counts in est.models_]
            params.update(vote=est.vote, epochs=est.epochs)
            if scheme == "binary":
                params["positive"] = str(est.positive_)
        else:
            raise EvaluationError(f"cannot save a {type(est).__name__}; train an SVC, a one-vs-rest SVC or "
                                  "a VotedPerceptron on a precomputed kernel")
        return cls.from_functions(spec, learner, scheme, classes, funcs, train_docs, params, provenance, resources)

    @classmethod
    def from_functions(cls, spec, learner: str, scheme: str, classes, funcs, train_docs, params=None,
                       provenance=None, resources: TrainedResources | None = None,
                       task: str = "classification") -> SavedModel:
        """A saved model from its decision functions over training positions: for an SVM
        ``(positions, coef, intercept[, pair])`` each (``f(x) = sum coef K(x, train[pos]) +
        intercept``, as SVC's ``dual_coef_`` / ``intercept_``; e.g. from
        :func:`~gramtile.pipeline.learn.crossval.fit_smo_functions`), for the perceptron
        ``(positions, ylab, counts)``; a regression or ranking (``task``) has one function, scheme
        ``single``, and no classes. Other parameters as :meth:`from_estimator`."""
        spec = as_spec(spec)
        params = dict(params or {})
        classes = [str(c) for c in classes]
        # the support set: every training example some function uses, in training order
        used = np.unique(np.concatenate([f[0] for f in funcs])) if funcs else np.zeros(0, np.int64)
        pos = {int(t): k for k, t in enumerate(used)}
        functions = []
        for f in funcs:
            sv = [pos[int(t)] for t in f[0]]
            if learner != "perceptron":  # every learner but the perceptron saves a kernel expansion
                d = {"sv": sv, "coef": np.asarray(f[1]).tolist(), "intercept": float(f[2])}
                if len(f) > 3:
                    d["pair"] = f[3]
            else:
                d = {"sv": sv, "ylab": f[1].tolist(), "counts": f[2].tolist()}
            functions.append(d)
        reps = kernel_reps(spec)
        if resources is None:
            resources = training_resources(spec, train_docs)
        support = []
        for t in used:
            doc = train_docs[int(t)]
            missing = [r for r in reps if r not in doc.structures]
            if missing:
                raise EvaluationError(f"training example {doc.id!r} has no representation {missing[0]!r} "
                                      f"that the kernel reads; it has {sorted(doc.structures)}")
            support.append(_copy_doc(doc, reps))
        sv_self = _self_kernels(spec, support, resources)
        return cls(spec=spec, learner=learner, scheme=scheme, classes=classes, functions=functions,
                   support=support, sv_self=sv_self, params=params, resources=resources, task=task,
                   provenance={"gramtile_version": version("gramtile"), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "n_train": len(train_docs), **(provenance or {})})

    # ---- prediction -------------------------------------------------------------------------

    def kernel_to_support(self, docs) -> np.ndarray:
        """K(docs, support), shape (n, n_sv): the only pair evaluations prediction needs.

        The support examples' self-kernels come from the model (``sv_self``), so for a
        normalised kernel only the test self-kernels are evaluated besides the n x n_sv pairs.
        """
        return kernel_block(self.spec, docs, self.support, self.sv_self, self.resources)

    def decision_function(self, K_sv) -> np.ndarray:
        """Scores from K(x, support), shape (n, n_sv): (n,) for binary and single, else (n, n_functions)."""
        K_sv = np.asarray(K_sv, dtype=np.float64)
        if K_sv.ndim != 2 or K_sv.shape[1] != self.n_support:
            raise EvaluationError(f"K has shape {K_sv.shape}; the model has {self.n_support} support examples")
        cols = []
        for f in self.functions:
            sv = np.asarray(f["sv"], dtype=np.int64)
            if "coef" in f:  # a kernel expansion (nystroem's: its linear model on phi(x), over the landmarks)
                cols.append(K_sv[:, sv] @ np.asarray(f["coef"]) + f["intercept"])
            else:

                cols.append(binary_score(K_sv, sv, np.asarray(f["ylab"]), np.asarray(f["counts"], np.int64),
                                          self.params.get("vote", "voted")))
        S = np.stack(cols, axis=1) if cols else np.zeros((K_sv.shape[0], 0))
        return S[:, 0] if self.scheme in ("binary", "single") else S

    def predict_from_kernel(self, K_sv) -> np.ndarray:
        """Labels from K(x, support); a regression's predicted targets, a ranking's scores."""
        S = self.decision_function(K_sv)
        if self.task != "classification":
            return S
        cl = np.asarray(self.classes, dtype=object)
        if self.scheme == "binary":
            if self.learner == "perceptron":
                pos = self.params["positive"]
                neg = next(c for c in self.classes if c != pos)
                return np.where(S > 0, pos, neg).astype(object)
            return np.where(S > 0, cl[1], cl[0]).astype(object)
        if self.scheme == "ovr":
            if self.learner == "perceptron":
                return cl[np.argmax(S, axis=1)]
            # OneVsRestClassifier: running maximum, a tie goes to the later class
            best = np.full(S.shape[0], -np.inf)
            arg = np.zeros(S.shape[0], dtype=np.int64)
            for i in range(S.shape[1]):
                np.maximum(best, S[:, i], out=best)
                arg[best == S[:, i]] = i
            return cl[arg]
        votes = np.zeros((S.shape[0], len(self.classes)), dtype=np.int64)
        for p, f in enumerate(self.functions):
            i, j = f["pair"]
            win = S[:, p] > 0
            votes[win, i] += 1
            votes[~win, j] += 1
        return cl[np.argmax(votes, axis=1)]  # argmax: first maximum = lower class index, as libsvm

    def predictions(self, docs) -> Predictions:
        """Labels and decision scores of Documents, and a line saying what it took."""
        K = self.kernel_to_support(docs)
        return Predictions(self.predict_from_kernel(K), self.decision_function(K),
                           f"{len(docs)} examples x {self.n_support} support examples "
                           f"({K.shape[0] * K.shape[1]:,} kernel evaluations)")

    def predict(self, X, spacy_model: str | None = None) -> np.ndarray:
        """Labels of examples: Documents, bare structures (a Tree, DepTree, ...), raw texts
        (parsed with spaCy, ``spacy_model`` or the default) or parsed spaCy ``Doc``s
        (:func:`as_documents`).

        Raises
        ------
        PredictInputError
            An example of another type, or one without a representation the kernel reads.
        """
        docs = as_documents(X, kernel_reps(self.spec, spaces=False), spacy_model=spacy_model, who="SavedModel.predict")
        return self.predict_from_kernel(self.kernel_to_support(docs))

    # ---- files ------------------------------------------------------------------------------

    def save(self, directory, overwrite: bool = True) -> Path:
        """Write the model directory, atomically: the files and their checksums (``manifest.json``,
        written last) go to a temporary directory beside it, renamed to ``directory`` once complete,
        so an interrupted save leaves no half model. An earlier model there is replaced when
        ``overwrite``, else refused, also when it appears while this one is written
        (:func:`~gramtile.pipeline.stores.integrity.publish_dir`); a directory holding anything but
        a model is refused."""
        final = Path(directory)
        if final.exists() and (not final.is_dir() or (any(final.iterdir()) and not (final / "model.json").exists())):
            raise StoreError(f"{final} exists and is not a model directory (no model.json); pass a new or empty "
                             "directory to --out, or remove it")
        final.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(final)
        d = temp_sibling(final)
        d.mkdir()
        try:
            self._write(d)
            write_manifest(d)
            publish_dir(d, final, overwrite, "model directory")
        finally:
            if d.exists():
                shutil.rmtree(d, ignore_errors=True)
        return final

    def _write(self, d: Path):
        files = {}
        for rep in kernel_reps(self.spec):
            name = f"support-{rep}.jsonl"
            _write_support(self.support, rep, d / name)
            files[rep] = name
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "model": "kernel", "kernel": self.spec.to_dict(),
                "kernel_hash": self.spec.spec_hash, "learner": self.learner, "task": self.task, "scheme": self.scheme,
                "classes": self.classes, "params": self.params, "functions": self.functions,
                "support_ids": [doc.id for doc in self.support], "support_labels": [doc.label for doc in self.support],
                "support_files": files, "sv_self": {h: v.tolist() for h, v in self.sv_self.items()},
                "provenance": self.provenance, "resources": _save_resources(self.resources, d)}
        (d / "model.json").write_text(json.dumps(meta, indent=1, default=_json_default))

    @classmethod
    def load(cls, directory) -> SavedModel:
        """Read a model directory written by :meth:`save`."""

        d = Path(directory)
        if not (d / MANIFEST).is_file() and not (d / "model.json").is_file():
            raise StoreError(f"{d} holds no model.json; pass a directory written by `gramtile train --out`")
        # every file against its checksum before any is parsed (the manifest names a lost one)
        check_manifest(d, "model directory", LEGACY_FIX.format(d=d), DAMAGED_FIX, required=("model.json",))
        try:
            meta = json.loads((d / "model.json").read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            raise StoreCorruptError(f"{d / 'model.json'} is not readable JSON ({e}). Fix: {DAMAGED_FIX}") from None
        if meta.get("model", "kernel") != "kernel":
            raise StoreError(f"{d / 'model.json'} holds a {meta.get('model')} model, not a kernel model; open it "
                             "with gramtile.pipeline.learn.model_files.load_model")
        if meta.get("format") != FORMAT or meta.get("format_version") not in READABLE_VERSIONS:
            raise StoreError(f"{d / 'model.json'} is not a gramtile model of format version "
                             f"{' or '.join(map(str, READABLE_VERSIONS))} "
                             f"(format {meta.get('format')!r}, version {meta.get('format_version')!r}); "
                             "train it again with this gramtile")
        spec = as_spec(meta["kernel"])
        if spec.spec_hash != meta["kernel_hash"]:
            raise StoreError(f"{d / 'model.json'}: kernel hash {meta['kernel_hash']} does not match its spec "
                             f"({spec.spec_hash}); the file was edited or written by another gramtile version (SST models "
                             f"before 2026-12 used the typed-leaves productions). Fix: train it again with this "
                             f"gramtile (`gramtile train`)")
        ids = meta["support_ids"]
        structs = {rep: _read_support(d / name, rep, ids) for rep, name in meta["support_files"].items()}

        support = [Document(id=i, label=lab, structures={rep: structs[rep][k] for rep in structs})
                   for k, (i, lab) in enumerate(zip(ids, meta["support_labels"]))]

        res = _load_resources(meta.get("resources"), d)
        missing = [n for n, r in resource_reps(spec).items()
                   if r is not None and (res is None or n not in res.values)]
        if missing:
            raise StoreError(f"{d / 'model.json'} (format version {meta['format_version']}) does not carry the "
                             f"resource {missing[0]!r} its kernel was trained with (an LSA / domain space depends "
                             f"on the training examples and cannot be rebuilt at prediction). Fix: train the model "
                             f"again with this gramtile (`gramtile train`)")
        sv_self = {h: np.asarray(v, dtype=np.float64) for h, v in meta["sv_self"].items()}
        check_support(d, spec, support, sv_self, res)
        task = meta.get("task", "classification")
        if task not in TASKS or (task != "classification") != (meta["scheme"] == "single"):
            raise StoreCorruptError(f"{d / 'model.json'}: task {task!r} with scheme {meta['scheme']!r} is not a model "
                                    f"gramtile writes. Fix: {DAMAGED_FIX}")
        return cls(spec=spec, learner=meta["learner"], scheme=meta["scheme"], classes=meta["classes"],
                   functions=meta["functions"], support=support, sv_self=sv_self,
                   params=meta["params"], provenance=meta["provenance"], resources=res, task=task)


# ---- helpers ---------------------------------------------------------------------------------

def _json_default(v):
    if hasattr(v, "item"):
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"{type(v).__name__} is not JSON serialisable")


def _copy_doc(doc, reps):

    return Document(id=doc.id, label=doc.label, text=doc.text, structures={r: doc.structures[r] for r in reps},
                    source=doc.source)


def structures_by_rep(docs, reps):
    out = {}
    for r in reps:
        vals = []
        for doc in docs:
            if r not in doc.structures:
                raise EvaluationError(f"example {doc.id!r} ({doc.source}) has no representation {r!r}, which the "
                                      f"kernel reads (it has {sorted(doc.structures)}); prepare the input with "
                                      "the representation the model was trained on")
            vals.append(doc.structures[r])
        out[r] = vals
    return out


def training_resources(spec, docs) -> TrainedResources | None:
    """The resources :func:`gramtile.gram` builds over ``docs`` (None when the spec reads none)."""

    names = resource_reps(spec)
    if not names:
        return None
    bx, _, vocabs = encode_with_resources(spec, structures_by_rep(docs, kernel_reps(spec)))
    return TrainedResources(list(vocabs.sym.strings), {n: bx[n] for n in names})


def resources_onto(spec, trained: TrainedResources | None, strings) -> dict:
    """The model's resources over the vocabulary ``strings`` of the prediction batches.

    LSA and domain spaces are mapped (:func:`gramtile.pipeline.resources.build.map_value`: seen
    symbols keep their rows, unseen ones get a zero row). WordNet synonymy is rebuilt from the
    strings and its entries among symbols seen at training are checked against the saved ones.

    Raises
    ------
    StoreError
        An LSA / domain resource the model does not carry.
    StoreMismatchError
        The rebuilt WordNet matrix differs from the saved one (another WordNet database).
    """

    out = {}
    for name, rep in resource_reps(spec).items():
        have = trained is not None and name in trained.values
        if rep is not None:
            if not have:
                raise StoreError(f"the model carries no resource {name!r}, which its kernel was trained with; "
                                 f"train the model again with this gramtile")
            out[name] = map_value(trained.values[name], trained.strings, strings)
            continue
        # WordNet: a function of the strings alone, so unseen words keep their synonyms
        fresh = build_value(name, strings, [])
        if have:
            index = set(trained.strings)
            seen = np.flatnonzero([s in index for s in strings])
            saved = map_value(trained.values[name], trained.strings, strings)
            diff = abs(fresh[seen][:, seen] - saved[seen][:, seen])
            if diff.nnz and diff.max() > 1e-12:
                raise StoreMismatchError(
                    f"resource {name!r}: WordNet here gives other synonymy values than the database the model was "
                    f"trained with (largest difference {diff.max():.3g}); point GRAMTILE_WORDNET at that "
                    f"database (see the model's provenance) or train the model again")
        out[name] = fresh
    return out


def _encode(spec, groups, trained):
    """Encode groups of Documents over one vocabulary; resources (mapped) join the first group."""

    # the model's saved spaces replace the space_rep examples: only the read representations
    reps = kernel_reps(spec, spaces=False)
    structs = [structures_by_rep(g, reps) for g in groups]
    vocabs = Vocabularies()
    batches = [{} for _ in groups]
    for r in reps:
        for b, sx in zip(batches, structs):
            b[r] = encode(sx[r], vocabs)
    batches[0].update(resources_onto(spec, trained, vocabs.sym.strings))
    return batches


def _self_kernels(spec, docs, trained=None) -> dict:
    """Base spec hash -> K_base(x, x) over ``docs`` (the diagonal only: n evaluations per base),
    with the resources ``trained``."""

    (bx,) = _encode(spec, [docs], trained)
    return {b.spec_hash: np.asarray(b.diag(batch_for(bx, b), **resources_for(bx, b)), dtype=np.float64)
            for b in spec.base_specs()}


def check_support(d: Path, spec, support, sv_self: dict, trained=None) -> None:
    """Refuse a model whose support examples do not give the self-kernels recorded at training
    (``sv_self``, per base kernel): support files, resources or kernel that no longer belong
    together (edited files with a recomputed manifest, a kernel whose definition changed since).
    Costs one kernel evaluation per support example and base kernel."""
    if not support:
        return
    got = _self_kernels(spec, support, trained)
    for b in spec.base_specs():
        want = sv_self.get(b.spec_hash)
        have = got[b.spec_hash]
        if want is None or want.shape != have.shape:
            raise StoreCorruptError(f"{d / 'model.json'}: no self-kernels recorded for base kernel {b.to_json()} "
                                    f"over its {len(support)} support examples. Fix: {DAMAGED_FIX}")
        bad = ~np.isclose(have, want, rtol=1e-9, atol=1e-12)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise StoreCorruptError(
                f"{d}: support example {support[k].id!r} gives K(x, x) = {have[k]:.12g} under base kernel "
                f"{b.to_json()}, but {want[k]:.12g} was recorded at training ({int(bad.sum())} of {len(support)} "
                f"support examples differ): the support examples and the kernel do not belong together. "
                f"Fix: {DAMAGED_FIX}")


def kernel_block(spec, docs, support, sv_self, trained=None) -> np.ndarray:
    """K_spec(docs, support) from base blocks, taking the support self-kernels from ``sv_self``
    and the corpus resources from ``trained`` (see :func:`resources_onto`)."""

    bx, by = _encode(spec, [docs, support], trained)
    base = {}
    for b in spec.base_specs():
        kw = resources_for(bx, b)
        X, Y = batch_for(bx, b), batch_for(by, b)
        base[b.spec_hash] = (b.block(X, Y, **kw), b.diag(X, **kw), sv_self[b.spec_hash])
    K, _, _ = spec.combine(base)
    return np.asarray(K, dtype=np.float64)


def _save_resources(trained, d: Path):
    """Write ``trained`` into model directory ``d``; return its model.json entry (None: none)."""

    if trained is None or not trained.values:
        return None
    arrays, listed = {}, []
    for k, (name, value) in enumerate(sorted(trained.values.items())):
        kind, arr = arrays_of(value)
        shape = [int(x) for x in value.shape]
        listed.append({"name": name, "kind": kind, "shape": shape, "prefix": f"r{k}",
                       "content_hash": content_hash(kind, shape, arr)})
        arrays.update({f"r{k}.{a}": v for a, v in arr.items()})
    with open(d / RESOURCES_FILE, "wb") as f:
        np.savez(f, **arrays)
    text = json.dumps(list(trained.strings), ensure_ascii=False)
    (d / STRINGS_FILE).write_text(text, encoding="utf-8")

    return {"file": RESOURCES_FILE, "strings_file": STRINGS_FILE, "n_strings": len(trained.strings),
            "strings_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "values": listed}


def _load_resources(entry, d: Path):
    """The :class:`TrainedResources` of a model.json ``resources`` entry, hashes checked."""


    if not entry:
        return None
    fix = "the model directory is damaged; train the model again"
    try:
        text = (d / entry["strings_file"]).read_text(encoding="utf-8")
        npz = np.load(d / entry["file"], allow_pickle=False)
    except OSError as e:
        raise StoreCorruptError(f"{d}: cannot read the model's resources ({e}); {fix}") from None
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != entry["strings_sha256"]:
        raise StoreCorruptError(f"{d / entry['strings_file']} does not match the sha256 model.json records; {fix}")
    values = {}
    with npz:
        for r in entry["values"]:
            try:
                arr = {n: npz[f"{r['prefix']}.{n}"] for n in ARRAY_NAMES[r["kind"]]}
            except KeyError as e:
                raise StoreCorruptError(f"{d / entry['file']} lacks array {e} of resource {r['name']!r}; {fix}") \
                    from None
            if content_hash(r["kind"], r["shape"], arr) != r["content_hash"]:
                raise StoreCorruptError(f"{d / entry['file']}: resource {r['name']!r} does not match its content "
                                        f"hash {r['content_hash'][:16]}... in model.json; {fix}")
            values[r["name"]] = value_of(r["kind"], r["shape"], arr)
    return TrainedResources(json.loads(text), values)


def _write_support(support, rep, path):

    first = support[0].structures[rep] if support else None
    if isinstance(first, dict):
        # a sparse bag (KeLP vector) has no JSON-lines key: one {"id", "bag"} object per line
        with open(path, "w", encoding="utf-8") as f:
            for doc in support:
                f.write(json.dumps({"id": doc.id, "bag": doc.structures[rep]}, ensure_ascii=False) + "\n")
        return
    key = next((n for n, t in NAMES.items() if first is not None and type(first) is t), None)
    if support and key is None:
        raise EvaluationError(f"representation {rep!r} ({type(first).__name__}) has no JSON-lines form; "
                              "the model cannot be saved")
    write_jsonl((Document(id=doc.id, label=doc.label, structures={key: doc.structures[rep]}) for doc in support),
                path)


def _read_support(path, rep, ids):

    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if lines and '"bag"' in lines[0] and json.loads(lines[0]).keys() == {"id", "bag"}:
        objs = [json.loads(ln) for ln in lines]
        got, vals = [o["id"] for o in objs], [o["bag"] for o in objs]
    else:
        docs = list(read_jsonl(path, max_tokens=None))
        got = [doc.id for doc in docs]
        vals = [next(iter(doc.structures.values())) for doc in docs]
    if got != list(ids):
        raise StoreError(f"{path}: support examples {got[:3]}... do not match model.json's support_ids "
                         f"{list(ids)[:3]}...; the model directory is inconsistent, train it again")
    return vals


# ---- training --------------------------------------------------------------------------------

def stored_kernel(spec, grams, corpus_hash=None):
    """K_spec over a square Gram store's rows, derived from the stores in ``grams`` (paths).

    Returns
    -------
    (K, rows, stores): K (n, n), the corpus rows of K, and {base kernel hash: GramStore}.
    """

    source, rows, stores = stored_source(spec, grams, corpus_hash)
    n = source.n
    return np.asarray(source.block(np.arange(n), np.arange(n)), dtype=np.float64), rows, stores


def stored_source(spec, grams, corpus_hash=None):
    """:func:`stored_kernel` as a kernel source over the stores (nothing read yet).

    Returns
    -------
    (ViewKernelSource, rows, stores)
    """

    stores = {}
    for g in grams:
        st = GramStore.open(g)
        if not st.symmetric:
            raise EvaluationError(f"--gram {g} is rectangular; training needs the square K(train, train)")
        if corpus_hash is not None and st.corpus_hash != corpus_hash:
            raise StoreMismatchError(f"--gram {g} was computed from corpus {st.corpus_hash}, not the --corpus "
                                     f"store ({corpus_hash}); pass Gram stores of this corpus")
        stores[st.kernel_hash] = st
    view = ComposedView(as_spec(spec), stores)
    first = next(iter(view.views.values())).store
    return ViewKernelSource(view), first.rows(), stores


def stored_resources(corpus_path, spec, stores) -> TrainedResources | None:
    """The corpus store's resources a Gram-store K was computed with (loaded, never built).

    Each is loaded with the content hash the Gram stores' provenance records
    (:func:`gramtile.pipeline.resources.build.load`), so a resource rebuilt since is a
    :class:`StoreMismatchError`, not a silently different kernel.
    """

    keys = keys_of(spec)
    if not keys:
        return None
    recorded = {}
    for st in stores.values():
        recorded.update(st.meta.get("resources") or {})
    values = {k.name: load(corpus_path, k, expect_hash=recorded.get(k.group)) for k in keys}
    return TrainedResources(list(CorpusStore.open(corpus_path).vocabs.sym.strings), values)


def relabel(docs, labels_file, what: str) -> list:
    """``docs`` with the labels of ``labels_file`` (one per line, one per document, in order) instead
    of their own; ``docs`` as they are when ``labels_file`` is None."""
    if labels_file is None:
        return docs
    for d, label in zip(docs, read_label_file(labels_file, len(docs), what)):
        d.label = label
    return docs


# ---- documents for train / predict ------------------------------------------------------------

def as_documents(X, reps, spacy_model: str | None = None, who: str = "predict") -> list:
    """Documents carrying the representations ``reps`` from a list of Documents, bare
    structures, raw texts or parsed spaCy ``Doc``s (mixed freely).

    A bare ``DepTree`` (and a text or ``Doc``, once parsed) gets every structure derived from
    it (``dep``, ``seq``, ``tree``, ``ptree``); another bare structure fills its kind's default
    representation. Raises :class:`PredictInputError` naming the example and the fix.
    """
    if table_kind(X) in ("frame", "series", "arrow", "dataset"):
        X = parse(X, model=spacy_model, what=who)  # the rows' texts (a list of dicts stays bags of features)
    if isinstance(X, (str, Document)) or not hasattr(X, "__iter__"):
        X = [X]
    X = list(X)
    if not X:
        raise PredictInputError(f"{who}: no examples; pass a non-empty list of Documents, structures or texts")
    out, texts = [None] * len(X), []
    for i, x in enumerate(X):
        if isinstance(x, Document):
            out[i] = x
        elif isinstance(x, str) or is_spacy_doc(x) or isinstance(x, TokenList):
            texts.append(i)  # what gramtile.parse reads: raw text, bracket strings, spaCy Docs, CoNLL-U
        else:
            try:
                kind = kind_of(x)
            except TypeError:
                raise PredictInputError(f"{who}: example {i} is a {type(x).__name__}; pass Documents, structures "
                                        "(Tree, DepTree, TokenSeq, PTree, ...), raw texts or spaCy Docs") from None
            structs = derive_all(x) if isinstance(x, DepTree) else {DEFAULT_REP[kind]: x}
            out[i] = Document(id=f"x{i}", structures=structs)
    if texts:
        for i, d in zip(texts, parse([X[i] for i in texts], model=spacy_model, what=who)):
            out[i] = Document(id=f"x{i}", text=d.text, structures=d.structures)
    for i, d in enumerate(out):
        missing = [r for r in reps if r not in (d.structures or {})]
        if missing:
            raise PredictInputError(f"{who}: example {i} ({d.id!r}) has no representation {missing[0]!r}, which the "
                                    f"kernel reads (it has {sorted(d.structures or {})}); pass Documents with it, "
                                    "or raw texts to parse")
    return out


def read_documents(path, fmt: str, model: str | None = None, pretokenized: bool | None = None,
                   limit: int | None = None, links=(LINKED,), **options) -> list:
    """Documents of a file, parsing with spaCy those that carry only text (raw text, tables, trec,
    text-only JSON lines) into the derived representations (``dep``, ``seq``, ``tree``, ``ptree``);
    an example of several texts (fields) gets each field's, keyed ``<field>.<rep>`` as a corpus
    store keys them, and the relational-link representations ``links``
    (:data:`~gramtile.pipeline.parsing.links.LINKS`; a model passes those its kernel reads).
    ``options`` are the reader's (:func:`gramtile.pipeline.parsing.formats.read`: ``labels``,
    ``text_col``, ``fields``, ...)."""

    docs = list(islice(read(path, fmt, **options), limit) if limit else read(path, fmt, **options))
    todo = [d for d in docs if needs_parse(d)]
    if todo:

        pretok = (fmt in PRETOKENIZED_FORMATS) if pretokenized is None else bool(pretokenized)
        items, _ = parse_derive_shard([t for d in todo for t in texts_of(d)], pretok, model)
        it = iter(items)
        for d in todo:
            if d.fields is None:
                d.structures = _derived(next(it))
            else:  # each field's text gets the structures a single text gets, keyed per field, and the
                # pair's relational links (rel_tree), as prepare gives them
                d.structures = with_links({field_key(name, rep): s for name in d.fields
                                           for rep, s in _derived(next(it)).items()}, d.fields, links)
    return docs


def _derived(item) -> dict:
    return item if isinstance(item, dict) else derive_all(item)
