"""Saved linear models over explicit features: weights, the kernel, and what maps a new example
onto the feature ids the weights are indexed by.

A model directory written by :meth:`LinearModel.save` (``gramtile train --features F.zarr
--model linear --out DIR``) is in the one model format (:mod:`.models`, read by
:func:`~gramtile.pipeline.learn.model_files.load_model`) and holds

- ``model.json``: format ``gramtile-model``, its version, ``"model": "linear"``, the learner,
  the kernel spec of the feature store (a base kernel with a feature map, or ``normalized`` of
  one) and its hash (checked on load), the classes, the learner's parameters, the feature
  store's attribute (the base spec, the representation it reads, name and kind; provenance), and
  the corpus's string vocabularies (``sym``, ``prod``, ``pprod``) that the feature keys are built
  from;
- ``weights.npz``: ``coef`` (one row per one-vs-rest function, one row for two classes),
  ``intercept``, and a copy of the feature vocabulary (``key_ptr``, ``key_items``, ``order``:
  column f's key and weight exponent, as in the corpus store's feature set);
- ``manifest.json``: the sha256 of every other file, checked before any is read.

Directories written before the one format (``linear.json`` and ``linear.npz``, format
``gramtile-linear-model`` version 2) load as they are.

Predicting from examples (:meth:`LinearModel.feature_rows`): the examples' structures are
encoded with a copy of the corpus's string vocabularies (a string unseen at training gets a new
id, which no stored key holds), the kernel's feature map gives their batch-local features, and
their keys are looked up in the saved vocabulary without growing it. A feature unseen in
training has no column: it is dropped, which is exact for the decision since its weight would
be zero. Its weight ``w_f = base ** order_f`` still counts in the example's norm, so for a
normalised kernel the row is ``phi(x) sqrt(w) / ||phi(x) sqrt(w)||`` over *all* of its features,
as the kernel ``K(x, y) / sqrt(K(x, x) K(y, y))`` computes it.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gramtile.kernels.maps import weights
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.feature_sets import FeatureVocab, map_of
from gramtile.pipeline.learn.errors import EvaluationError, PredictInputError
from gramtile.pipeline.learn.models import (
    DAMAGED_FIX,
    FORMAT,
    FORMAT_VERSION,
    LEGACY_FIX,
    MODEL_FILE,
    Predictions,
    as_documents,
)
from gramtile.pipeline.parsing.derive import derive_all
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.structures import DepTree, Document
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError
from gramtile.pipeline.stores.integrity import (
    MANIFEST,
    check_manifest,
    clean_stale,
    publish_dir,
    temp_sibling,
    write_manifest,
)

ARRAYS_FILE = "weights.npz"
#: the files of linear models written before the one model format (read, never written)
OLD_FORMAT, OLD_VERSION, OLD_MODEL_FILE, OLD_ARRAYS_FILE = "gramtile-linear-model", 2, "linear.json", "linear.npz"


def is_linear_model(directory) -> bool:
    """True when ``directory`` holds a linear model (``model.json`` saying so, or the older
    ``linear.json``)."""
    d = Path(directory)
    if (d / OLD_MODEL_FILE).is_file():
        return True
    try:
        return json.loads((d / MODEL_FILE).read_text(encoding="utf-8")).get("model") == "linear"
    except (OSError, ValueError, AttributeError):
        return False


class LinearModel:
    """A trained linear classifier over the columns of a feature store.

    Attributes
    ----------
    coef : ndarray (n_functions, n_features)
        One row per one-vs-rest class, one row for two classes (``f > 0`` predicts ``classes[1]``).
    intercept : ndarray (n_functions,)
    classes : list of str
    meta : dict
        The feature store's attribute (``spec``, ``base``, ``normalized``, ``rep``, ``rep_kind``, ...).
    params : dict
        Learner parameters (solver, C, class_weight, ...).
    vocab_arrays : dict or None
        ``key_ptr``, ``key_items``, ``order`` of the feature vocabulary (needed to predict from
        examples, not from feature rows).
    strings : dict or None
        The corpus's string vocabularies the keys refer to.
    """

    def __init__(self, coef, intercept, classes, meta: dict, params: dict | None = None,
                 vocab_arrays: dict | None = None, strings: dict | None = None):
        self.coef = np.asarray(coef, np.float64)
        self.intercept = np.asarray(intercept, np.float64).reshape(-1)
        self.classes = [str(c) for c in classes]
        self.meta = dict(meta)
        self.params = dict(params or {})
        self.vocab_arrays = vocab_arrays
        self.strings = strings
        self._vocab = None
        if self.coef.ndim != 2 or self.coef.shape[0] != self.intercept.shape[0]:
            raise EvaluationError(f"linear model: coef of shape {self.coef.shape} and {self.intercept.shape[0]} "
                                  "intercepts do not match")

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[1])

    # ---- decisions --------------------------------------------------------------------------

    def decision_function(self, X) -> np.ndarray:
        """Scores of feature rows (a matrix over the feature store's columns) or of examples
        (Documents, structures, raw texts: :meth:`feature_rows`); (n,) for two classes, else
        (n, n_classes)."""
        if not sp.issparse(X) and not isinstance(X, np.ndarray):
            X = self.feature_rows(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise EvaluationError(f"feature rows have {X.shape[-1]} columns, the model {self.n_features}; use rows "
                                  f"of the feature store it was trained on, or pass examples")
        S = np.asarray(X @ self.coef.T) + self.intercept
        return S[:, 0] if S.shape[1] == 1 else S

    def predict(self, X) -> list:
        """Labels (argmax of the one-vs-rest scores, the first on ties, as LinearSVC / SGDClassifier)."""
        return labels_of(self.decision_function(X), self.classes)

    def predictions(self, docs) -> Predictions:
        """Labels and decision scores of Documents, and a line saying what it took: the examples'
        structures mapped onto the model's feature ids (unseen features dropped: their weight is
        zero), then w.x + b."""
        X = self.feature_rows(docs)
        S = self.decision_function(X)
        return Predictions(np.asarray(labels_of(S, self.classes), dtype=object), S,
                           f"{len(docs)} examples, linear model over {self.n_features} features "
                           f"({X.nnz} known non-zeros)")

    @property
    def spec(self):
        """The kernel whose feature space the weights live in (the feature store's)."""
        return as_spec(self.meta["spec"])

    # ---- new examples -----------------------------------------------------------------------

    @property
    def base(self):
        return as_spec(self.meta["base"])

    def feature_rows(self, X, spacy_model: str | None = None) -> sp.csr_matrix:
        """Rows over the model's columns for examples: Documents, bare structures, raw texts or
        spaCy Docs (texts are parsed). Features unseen in training are dropped (zero weight);
        for a normalised kernel each row is divided by its norm over all of its features."""
        if self.vocab_arrays is None or self.strings is None:
            raise EvaluationError("this linear model has no feature vocabulary (saved before format version 2); "
                                  "it predicts only from feature rows. Fix: train it again with `gramtile train "
                                  "--features F.zarr --model linear`")
        base = self.base
        rep = self.meta.get("rep", base.rep_name)
        docs = as_documents([with_derived(x, rep) for x in _listed(X)], [rep], spacy_model=spacy_model,
                            who="LinearModel.predict")
        if self._vocab is None:
            self._vocab = FeatureVocab(self.vocab_arrays["key_ptr"], self.vocab_arrays["key_items"],
                                       self.vocab_arrays["order"])
        vocabs = Vocabularies.from_dict(self.strings)
        batch = encode([d.structures[rep] for d in docs], vocabs, kind=self.meta.get("rep_kind", base.reads))
        fmap = map_of(base)
        lf = fmap.local(base, batch.readonly())
        gid = self._vocab.intern(lf, grow=False)
        n = len(docs)
        row = np.repeat(np.arange(n), np.diff(lf.ptr))
        val = lf.val * np.sqrt(weights(fmap, base, lf.order)[lf.idx])
        if self.meta.get("normalized"):
            norms = np.sqrt(np.bincount(row, weights=val * val, minlength=n))
            val = val / np.where(norms > 0, norms, 1.0)[row]
        col = gid[lf.idx]
        keep = col >= 0
        if lf.idx.size and not keep.any():
            # not one feature of any example is a training feature: input of another representation
            # (e.g. trees derived from a dependency parse given to a constituency-tree model), which
            # would predict the intercept for every example
            raise PredictInputError(
                f"LinearModel.predict: none of the {int(lf.idx.size)} features of the {n} example(s) occurs in the "
                f"model's training features: the input cannot be represented as the model's {rep!r} "
                f"({self.meta.get('rep_kind', base.reads)}) structures. Fix: give input in the format the feature "
                f"store's corpus was prepared from")
        m = sp.csr_matrix((val[keep], (row[keep], col[keep])), shape=(n, self.n_features))
        m.sort_indices()
        return m

    # ---- files ------------------------------------------------------------------------------

    def save(self, directory, overwrite: bool = False) -> Path:
        """Write the model into the new or empty directory ``directory`` (or over a model there when
        ``overwrite``), whole or not at all: the files and their checksums (``manifest.json``,
        written last) go to a sibling temporary directory renamed into place, a rename that fails if
        ``directory`` was filled meanwhile (:func:`~gramtile.pipeline.stores.integrity.publish_dir`)."""
        final = Path(directory)
        if final.exists() and (not final.is_dir() or (any(final.iterdir()) and not overwrite)):
            raise StoreError(f"{final} exists and is not empty; pass a new directory")
        final.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(final)
        tmp = temp_sibling(final)
        tmp.mkdir()
        try:
            arrays = {"coef": self.coef, "intercept": self.intercept, **(self.vocab_arrays or {})}
            np.savez(tmp / ARRAYS_FILE, **arrays)
            spec = self.spec
            info = {"format": FORMAT, "format_version": FORMAT_VERSION, "model": "linear", "learner": "linear",
                    "kernel": spec.to_dict(), "kernel_hash": spec.spec_hash, "classes": self.classes,
                    "params": self.params, "features": self.meta, "strings": self.strings}
            (tmp / MODEL_FILE).write_text(json.dumps(info), encoding="utf-8")
            write_manifest(tmp)
            publish_dir(tmp, final, overwrite, "model directory")
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return final

    @classmethod
    def load(cls, directory) -> LinearModel:
        """Read a model directory written by :meth:`save` (or, before the one model format, with
        ``linear.json``), every file checked against its sha256 first (one line naming a damaged
        file and the fix, never a decode error), then the kernel against its recorded hash."""
        d = Path(directory)
        old = (d / OLD_MODEL_FILE).is_file()
        model_file, arrays_file = (OLD_MODEL_FILE, OLD_ARRAYS_FILE) if old else (MODEL_FILE, ARRAYS_FILE)
        if not (d / MANIFEST).is_file() and (not (d / model_file).is_file() or not (d / arrays_file).is_file()):
            raise EvaluationError(f"{d} holds no linear model ({MODEL_FILE} and {ARRAYS_FILE}); train one with "
                                  f"`gramtile train --features F.zarr --model linear --out {d}`")
        check_manifest(d, "model directory", LEGACY_FIX.format(d=d), DAMAGED_FIX, required=(model_file, arrays_file))
        try:
            info = json.loads((d / model_file).read_text(encoding="utf-8"))
            if not isinstance(info, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            raise StoreCorruptError(f"{d / model_file} is not readable JSON ({e}). Fix: {DAMAGED_FIX}") from None
        want = (OLD_FORMAT, OLD_VERSION) if old else (FORMAT, FORMAT_VERSION)
        if (info.get("format"), info.get("format_version")) != want or (not old and info.get("model") != "linear"):
            raise StoreError(f"{d / model_file} is not a linear model of format {want[0]} version {want[1]} (format "
                             f"{info.get('format')!r}, version {info.get('format_version')!r}, model "
                             f"{info.get('model')!r}); train it again with this gramtile")
        if not old:
            try:
                spec = as_spec(info["kernel"])
                ok = spec.spec_hash == info["kernel_hash"] == as_spec(info["features"]["spec"]).spec_hash
            except (KeyError, TypeError, ValueError):
                ok = False
            if not ok:
                raise StoreError(f"{d / model_file}: its kernel does not match its recorded hash "
                                 f"({str(info.get('kernel_hash'))[:16]}...) or its feature store's kernel; the file "
                                 f"was edited or written by another gramtile version. Fix: {DAMAGED_FIX}")
        try:
            with np.load(d / arrays_file, allow_pickle=False) as a:
                vocab = {k: a[k] for k in ("key_ptr", "key_items", "order")} if "key_ptr" in a.files else None
                coef, intercept = a["coef"], a["intercept"]
        except Exception as e:  # noqa: BLE001  (a damaged archive: BadZipFile, EOFError, ValueError, ...)
            raise StoreCorruptError(f"{d / arrays_file} cannot be read ({type(e).__name__}: {e}). Fix: "
                                    f"{DAMAGED_FIX}") from None
        return cls(coef, intercept, info["classes"], info["features"], info.get("params"), vocab,
                   info.get("strings"))


def _listed(X) -> list:
    if isinstance(X, (str, Document)) or not hasattr(X, "__iter__"):
        return [X]
    return list(X)


def with_derived(x, rep: str):
    """A Document lacking ``rep`` but holding a dependency tree (``dep``) gets the structures
    derived from it (``tree``, ``seq``, ...), as ``gramtile prepare --reps`` derives them."""
    if isinstance(x, Document) and rep not in (x.structures or {}) and isinstance((x.structures or {}).get("dep"),
                                                                                   DepTree):
        return Document(id=x.id, label=x.label, text=x.text, source=x.source,
                        structures={**derive_all(x.structures["dep"]), **x.structures})
    return x


def labels_of(S, classes) -> list:
    """Labels from scores: ``S > 0`` -> ``classes[1]`` for (n,) scores, else the argmax."""
    S = np.asarray(S)
    if S.ndim == 1:
        return [classes[int(v > 0)] for v in S]
    return [classes[i] for i in np.argmax(S, axis=1)]
