"""gramtile: tiled Gram matrices of structured NLP kernels.

The package is assembled from the repository's top-level folders:
``gramtile.kernels`` (kernels/), ``gramtile.pipeline`` (pipeline/), ``gramtile.workflows``
(workflows/). This module holds only the public entry points:

- the commands as Python functions (:mod:`gramtile.workflows.api`): :func:`prepare`,
  :func:`gram` (in memory for small inputs, or through the tiled engine into a store, on a
  cluster profile, a scheduler or a ``distributed.Client``), :func:`features`,
  :func:`evaluate`, :func:`train`, :func:`predict`, :func:`export` and :func:`open` (any
  store or model directory), each taking the options of its command;
- :func:`parse` (:mod:`gramtile.pipeline.parsing.convert`): a user's raw text, spaCy Docs,
  CoNLL-U TokenLists or bracket strings as Documents with the representations kernels read;
- the stores (:class:`CorpusStore`, :class:`GramStore`, :class:`FeatureStore`) and the
  scikit-learn estimators (:class:`KernelSVC`, :class:`KernelSVR`, :class:`KernelRanker`,
  :class:`GramTransformer`, :class:`VotedPerceptron`) and :class:`SavedModel`.

Importing gramtile sets ``NUMBA_CACHE_DIR`` (unless it is set) to the user cache folder, before
Numba is imported, so the compiled kernel cores are cached even in a read-only install
(:mod:`gramtile.pipeline.compute.compilation`). Import gramtile before Numba, or set it yourself.
"""
import importlib
import os
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from platformdirs import user_cache_dir

os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(user_cache_dir("gramtile"), "numba"))

__version__ = version("gramtile")

__all__ = ["__version__"]

# ---- the entry points and the scikit-learn estimators, imported on first use: `import gramtile`
# (and the command line, which imports it first) stays fast ----
_API = "gramtile.workflows.api"
_ESTIMATOR = "gramtile.pipeline.learn.estimator"
#: public name -> (module, attribute)
_ENTRY_POINTS = {
    "prepare": (_API, "prepare"), "gram": (_API, "gram"), "features": (_API, "features"),
    "evaluate": (_API, "evaluate"), "train": (_API, "train"), "predict": (_API, "predict"),
    "export": (_API, "export"), "open": (_API, "open_store"),
    "parse": ("gramtile.pipeline.parsing.convert", "parse"),
    "CorpusStore": ("gramtile.pipeline.stores.corpus_store", "CorpusStore"),
    "GramStore": ("gramtile.pipeline.stores.gram_store", "GramStore"),
    "FeatureStore": ("gramtile.pipeline.stores.feature_store", "FeatureStore"),
    "KernelSVC": (_ESTIMATOR, "KernelSVC"), "GramTransformer": (_ESTIMATOR, "GramTransformer"),
    "KernelSVR": (_ESTIMATOR, "KernelSVR"), "KernelRanker": (_ESTIMATOR, "KernelRanker"),
    "VotedPerceptron": ("gramtile.pipeline.learn.perceptron", "VotedPerceptron"),
    "SavedModel": ("gramtile.pipeline.learn.models", "SavedModel"),
}
__all__ += list(_ENTRY_POINTS)

if TYPE_CHECKING:   # for type checkers and the API reference; at run time __getattr__ imports them
    from gramtile.pipeline.learn.estimator import GramTransformer as GramTransformer
    from gramtile.pipeline.learn.estimator import KernelRanker as KernelRanker
    from gramtile.pipeline.learn.estimator import KernelSVC as KernelSVC
    from gramtile.pipeline.learn.estimator import KernelSVR as KernelSVR
    from gramtile.pipeline.learn.models import SavedModel as SavedModel
    from gramtile.pipeline.learn.perceptron import VotedPerceptron as VotedPerceptron
    from gramtile.pipeline.parsing.convert import parse as parse
    from gramtile.pipeline.stores.corpus_store import CorpusStore as CorpusStore
    from gramtile.pipeline.stores.feature_store import FeatureStore as FeatureStore
    from gramtile.pipeline.stores.gram_store import GramStore as GramStore
    from gramtile.workflows.api import evaluate as evaluate
    from gramtile.workflows.api import export as export
    from gramtile.workflows.api import features as features
    from gramtile.workflows.api import gram as gram
    from gramtile.workflows.api import open_store as open  # noqa: F401  (gramtile.open, as zarr.open)
    from gramtile.workflows.api import predict as predict
    from gramtile.workflows.api import prepare as prepare
    from gramtile.workflows.api import train as train


def __getattr__(name: str) -> Any:
    if name in _ENTRY_POINTS:
        module, attr = _ENTRY_POINTS[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'gramtile' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ENTRY_POINTS))
