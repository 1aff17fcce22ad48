"""Saved kernel models: train once, predict on new examples evaluating the kernel against the
support vectors only.

A model directory holds

- ``model.json``: format version, the kernel spec (JSON) and its hash, the learner (``svm`` or
  ``perceptron``) and its parameters, the scheme (``binary``, ``ovr``, ``ovo``), the label map
  (``classes``), one *decision function* per binary sub-problem, the support examples' ids and
  the self-kernels of every base kernel over them, and provenance (corpus hash, gramtile
  version, date);
- ``support-<rep>.jsonl``: the support examples, one file per representation the kernel reads,
  in the JSON-lines interchange format (FORMATS.md; the structure is written under its JSON-lines
  key and renamed back on load). A sparse bag (KeLP vector) is written as ``{"id", "bag"}``.

A decision function is ``f(x) = sum_s coef[s] K(x, sv[s]) + intercept`` over positions ``sv``
into the support set (SVM), or a voted-perceptron mistake sequence. Schemes:

- ``binary``: one function; ``f > 0`` predicts ``classes[1]`` (scikit-learn's ``SVC``
  convention; for the perceptron the positive class is stored explicitly);
- ``ovr``: one function per class, the largest wins (ties: the later class, as
  ``OneVsRestClassifier``; the perceptron's: the first);
- ``ovo``: one function per class pair (i, j), i < j, in scikit-learn's order; ``f > 0`` votes
  for i; most votes wins, ties to the lower class index (libsvm). The pair's coefficients are
  read from ``SVC.dual_coef_``: for support vectors of class i row j - 1, for those of class j
  row i (libsvm's layout).

Normalised kernels need K(sv, sv) for every support vector; they are stored (``sv_self``, per
base kernel) so prediction evaluates n_test x n_sv pairs plus the test self-kernels, nothing else.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gramtile.kernels.errors import EvaluationError, StoreError

FORMAT_VERSION = 1


@dataclass
class SavedModel:
    """A trained kernel classifier over its support examples (see the module docstring).

    Attributes
    ----------
    spec : KernelSpec
    learner : {"svm", "perceptron"}
    scheme : {"binary", "ovr", "ovo"}
    classes : list of str
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

    @property
    def n_support(self) -> int:
        return len(self.support)

    # ---- building ---------------------------------------------------------------------------

    @classmethod
    def from_estimator(cls, est, spec, train_docs, params=None, provenance=None) -> "SavedModel":
        """Extract a saved model from an estimator fitted on K(train, train).

        Parameters
        ----------
        est : sklearn.svm.SVC, OneVsRestClassifier of SVC, or VotedPerceptron
        spec : KernelSpec (or dict / JSON)
        train_docs : list of Document
            The training examples in the order of K's rows.
        """
        from sklearn.multiclass import OneVsRestClassifier
        from sklearn.svm import SVC

        from gramtile.pipeline.evaluate import as_spec
        from gramtile.pipeline.perceptron import VotedPerceptron

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
        # the support set: every training example some function uses, in training order
        used = np.unique(np.concatenate([f[0] for f in funcs])) if funcs else np.zeros(0, np.int64)
        pos = {int(t): k for k, t in enumerate(used)}
        functions = []
        for f in funcs:
            sv = [pos[int(t)] for t in f[0]]
            if learner == "svm":
                d = {"sv": sv, "coef": f[1].tolist(), "intercept": f[2]}
                if len(f) > 3:
                    d["pair"] = f[3]
            else:
                d = {"sv": sv, "ylab": f[1].tolist(), "counts": f[2].tolist()}
            functions.append(d)
        reps = sorted({b.rep_name for b in spec.base_specs()})
        support = []
        for t in used:
            doc = train_docs[int(t)]
            missing = [r for r in reps if r not in doc.structures]
            if missing:
                raise EvaluationError(f"training example {doc.id!r} has no representation {missing[0]!r} "
                                      f"that the kernel reads; it has {sorted(doc.structures)}")
            support.append(_copy_doc(doc, reps))
        sv_self = _self_kernels(spec, support)
        return cls(spec=spec, learner=learner, scheme=scheme, classes=classes, functions=functions,
                   support=support, sv_self=sv_self, params=params,
                   provenance={"gramtile_version": _version(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "n_train": len(train_docs), **(provenance or {})})

    # ---- prediction -------------------------------------------------------------------------

    def kernel_to_support(self, docs) -> np.ndarray:
        """K(docs, support), shape (n, n_sv): the only pair evaluations prediction needs.

        The support examples' self-kernels come from the model (``sv_self``), so for a
        normalised kernel only the test self-kernels are evaluated besides the n x n_sv pairs.
        """
        return kernel_block(self.spec, docs, self.support, self.sv_self)

    def decision_function(self, K_sv) -> np.ndarray:
        """Scores from K(x, support), shape (n, n_sv): (n,) for binary, else (n, n_functions)."""
        K_sv = np.asarray(K_sv, dtype=np.float64)
        if K_sv.ndim != 2 or K_sv.shape[1] != self.n_support:
            raise EvaluationError(f"K has shape {K_sv.shape}; the model has {self.n_support} support examples")
        cols = []
        for f in self.functions:
            sv = np.asarray(f["sv"], dtype=np.int64)
            if self.learner == "svm":
                cols.append(K_sv[:, sv] @ np.asarray(f["coef"]) + f["intercept"])
            else:
                from gramtile.pipeline.perceptron import _binary_score

                cols.append(_binary_score(K_sv, sv, np.asarray(f["ylab"]), np.asarray(f["counts"], np.int64),
                                          self.params.get("vote", "voted")))
        S = np.stack(cols, axis=1) if cols else np.zeros((K_sv.shape[0], 0))
        return S[:, 0] if self.scheme == "binary" else S

    def predict_from_kernel(self, K_sv) -> np.ndarray:
        """Labels from K(x, support)."""
        S = self.decision_function(K_sv)
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

    def predict(self, docs) -> np.ndarray:
        """Labels of Documents (with the representations the kernel reads)."""
        return self.predict_from_kernel(self.kernel_to_support(docs))

    # ---- files ------------------------------------------------------------------------------

    def save(self, directory) -> Path:
        """Write the model directory (created if needed; files are overwritten)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        reps = sorted({b.rep_name for b in self.spec.base_specs()})
        files = {}
        for rep in reps:
            name = f"support-{rep}.jsonl"
            _write_support(self.support, rep, d / name)
            files[rep] = name
        meta = {"format": "gramtile-model", "format_version": FORMAT_VERSION, "kernel": self.spec.to_dict(),
                "kernel_hash": self.spec.spec_hash, "learner": self.learner, "scheme": self.scheme,
                "classes": self.classes, "params": self.params, "functions": self.functions,
                "support_ids": [doc.id for doc in self.support], "support_labels": [doc.label for doc in self.support],
                "support_files": files, "sv_self": {h: v.tolist() for h, v in self.sv_self.items()},
                "provenance": self.provenance}
        (d / "model.json").write_text(json.dumps(meta, indent=1, default=_json_default))
        return d

    @classmethod
    def load(cls, directory) -> "SavedModel":
        """Read a model directory written by :meth:`save`."""
        from gramtile.pipeline.evaluate import as_spec

        d = Path(directory)
        try:
            meta = json.loads((d / "model.json").read_text())
        except OSError:
            raise StoreError(f"{d} holds no model.json; pass a directory written by `gramtile train --out`") \
                from None
        if meta.get("format") != "gramtile-model" or meta.get("format_version") != FORMAT_VERSION:
            raise StoreError(f"{d / 'model.json'} is not a gramtile model of format version {FORMAT_VERSION} "
                             f"(format {meta.get('format')!r}, version {meta.get('format_version')!r}); "
                             "train it again with this gramtile")
        spec = as_spec(meta["kernel"])
        if spec.spec_hash != meta["kernel_hash"]:
            raise StoreError(f"{d / 'model.json'}: kernel hash {meta['kernel_hash']} does not match its spec "
                             f"({spec.spec_hash}); the file was edited or written by another gramtile version")
        ids = meta["support_ids"]
        structs = {rep: _read_support(d / name, rep, ids) for rep, name in meta["support_files"].items()}
        from gramtile.pipeline.structures import Document

        support = [Document(id=i, label=lab, structures={rep: structs[rep][k] for rep in structs})
                   for k, (i, lab) in enumerate(zip(ids, meta["support_labels"]))]
        return cls(spec=spec, learner=meta["learner"], scheme=meta["scheme"], classes=meta["classes"],
                   functions=meta["functions"], support=support,
                   sv_self={h: np.asarray(v, dtype=np.float64) for h, v in meta["sv_self"].items()},
                   params=meta["params"], provenance=meta["provenance"])


# ---- helpers ---------------------------------------------------------------------------------

def _version():
    from gramtile import __version__

    return __version__


def _json_default(v):
    if hasattr(v, "item"):
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"{type(v).__name__} is not JSON serialisable")


def _copy_doc(doc, reps):
    from gramtile.pipeline.structures import Document

    return Document(id=doc.id, label=doc.label, text=doc.text, structures={r: doc.structures[r] for r in reps},
                    source=doc.source)


def _structures_by_rep(docs, reps):
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


def _self_kernels(spec, docs) -> dict:
    """Base spec hash -> K_base(x, x) over ``docs`` (the diagonal only: n evaluations per base)."""
    from gramtile.pipeline.evaluate import _batch_for, _resources_for, add_resources
    from gramtile.pipeline.encode import encode
    from gramtile.pipeline.vocab import Vocabularies

    reps = sorted({b.rep_name for b in spec.base_specs()})
    sx = _structures_by_rep(docs, reps)
    vocabs = Vocabularies()
    bx = {r: encode(sx[r], vocabs) for r in reps}
    add_resources(spec, bx, vocabs, [sx])
    return {b.spec_hash: np.asarray(b.diag(_batch_for(bx, b), **_resources_for(bx, b)), dtype=np.float64)
            for b in spec.base_specs()}


def kernel_block(spec, docs, support, sv_self) -> np.ndarray:
    """K_spec(docs, support) from base blocks, taking the support self-kernels from ``sv_self``."""
    from gramtile.pipeline.evaluate import _batch_for, _resources_for, add_resources
    from gramtile.pipeline.encode import encode
    from gramtile.pipeline.vocab import Vocabularies

    reps = sorted({b.rep_name for b in spec.base_specs()})
    sx, sy = _structures_by_rep(docs, reps), _structures_by_rep(support, reps)
    vocabs = Vocabularies()
    bx, by = {}, {}
    for r in reps:
        bx[r] = encode(sx[r], vocabs)
        by[r] = encode(sy[r], vocabs)
    add_resources(spec, bx, vocabs, [sx, sy])
    base = {}
    for b in spec.base_specs():
        kw = _resources_for(bx, b)
        X, Y = _batch_for(bx, b), _batch_for(by, b)
        base[b.spec_hash] = (b.block(X, Y, **kw), b.diag(X, **kw), sv_self[b.spec_hash])
    K, _, _ = spec.combine(base)
    return np.asarray(K, dtype=np.float64)


def _write_support(support, rep, path):
    from gramtile.pipeline.readers.jsonl import NAMES, write_jsonl
    from gramtile.pipeline.structures import Document

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
    from gramtile.pipeline.readers.jsonl import read_jsonl

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

def build_estimator(learner: str, C: float, class_weight, multiclass: str, n_classes: int, epochs: int = 2,
                    seed=None):
    """The estimator :func:`train` fits on K(train, train)."""
    from gramtile.pipeline.learn import Setting

    s = Setting("perceptron", None, epochs) if learner == "perceptron" else Setting("svm", float(C))
    return s.build(class_weight, multiclass, n_classes, seed)


def train(docs, spec, K=None, learner: str = "svm", C: float = 1.0, class_weight=None, multiclass: str = "ovr",
          epochs: int = 2, seed=None, provenance=None) -> SavedModel:
    """Train a saved model on labelled Documents.

    Parameters
    ----------
    docs : list of Document
        Training examples (with the representations ``spec`` reads, and labels).
    spec : KernelSpec, dict or JSON
    K : ndarray (n, n), optional
        K_spec(docs, docs) if already computed (e.g. read from a Gram store); else computed in memory.
    learner, C, class_weight, multiclass, epochs, seed
        As in :func:`gramtile.pipeline.learn.evaluate`.
    """
    from gramtile.pipeline.evaluate import as_spec, gram
    from gramtile.pipeline.learn import _check_labels

    spec = as_spec(spec)
    y = np.asarray(_check_labels([d.label for d in docs], "training data"), dtype=object).astype(str)
    classes = np.unique(y)
    if len(classes) < 2:
        raise EvaluationError(f"training data have one class only ({classes.tolist()!r}); give two or more")
    if K is None:
        reps = sorted({b.rep_name for b in spec.base_specs()})
        K = gram(spec, _structures_by_rep(docs, reps))
    K = np.asarray(K, dtype=np.float64)
    if K.shape != (len(docs), len(docs)):
        raise EvaluationError(f"K has shape {K.shape} for {len(docs)} training examples; pass K(train, train)")
    est = build_estimator(learner, C, class_weight, multiclass, len(classes), epochs, seed)
    est.fit(K, y)
    params = {"C": None if learner == "perceptron" else float(C),
              "class_weight": class_weight, "multiclass": multiclass}
    return SavedModel.from_estimator(est, spec, docs, params=params, provenance=provenance)


# ---- documents for train / predict ------------------------------------------------------------

def read_documents(path, fmt: str, model: str | None = None, pretokenized: bool | None = None,
                   limit: int | None = None) -> list:
    """Documents of a file, parsing with spaCy those that carry only text (raw text, tsv, trec,
    text-only JSON lines) into the derived representations (``dep``, ``seq``, ``tree``, ``ptree``)."""
    from itertools import islice

    from gramtile.pipeline.derive import derive_all
    from gramtile.pipeline.prepare import PRETOKENIZED_FORMATS, _needs_parse
    from gramtile.pipeline.readers import read

    docs = list(islice(read(path, fmt), limit) if limit else read(path, fmt))
    todo = [d for d in docs if _needs_parse(d)]
    if todo:
        from gramtile.pipeline.parse import parse_derive_shard

        pretok = (fmt in PRETOKENIZED_FORMATS) if pretokenized is None else bool(pretokenized)
        items, _ = parse_derive_shard([d.text for d in todo], pretok, model)
        for d, item in zip(todo, items):
            d.structures = item if isinstance(item, dict) else derive_all(item)
    return docs
