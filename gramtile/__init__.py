"""gramtile: tiled Gram matrices of structured NLP kernels.

The package is assembled from the repository's top-level folders:
``gramtile.kernels`` (kernels/), ``gramtile.pipeline`` (pipeline/), ``gramtile.workflows``
(workflows/). This module holds only the public entry points:

- :func:`gram` (:mod:`gramtile.pipeline.compute.inmemory`): a kernel matrix in memory;
- :func:`parse` (:mod:`gramtile.pipeline.parsing.convert`): a user's raw text, spaCy Docs,
  CoNLL-U TokenLists or bracket strings as Documents with the representations kernels read.

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
_ESTIMATORS = {"gram": "gramtile.pipeline.compute.inmemory", "parse": "gramtile.pipeline.parsing.convert",
               "KernelSVC": "gramtile.pipeline.learn.estimator", "GramTransformer": "gramtile.pipeline.learn.estimator",
               "KernelSVR": "gramtile.pipeline.learn.estimator", "KernelRanker": "gramtile.pipeline.learn.estimator",
               "VotedPerceptron": "gramtile.pipeline.learn.perceptron", "SavedModel": "gramtile.pipeline.learn.models"}
__all__ += list(_ESTIMATORS)

if TYPE_CHECKING:   # for type checkers and the API reference; at run time __getattr__ imports them
    from gramtile.pipeline.compute.inmemory import gram as gram
    from gramtile.pipeline.learn.estimator import GramTransformer as GramTransformer
    from gramtile.pipeline.learn.estimator import KernelRanker as KernelRanker
    from gramtile.pipeline.learn.estimator import KernelSVC as KernelSVC
    from gramtile.pipeline.learn.estimator import KernelSVR as KernelSVR
    from gramtile.pipeline.learn.models import SavedModel as SavedModel
    from gramtile.pipeline.learn.perceptron import VotedPerceptron as VotedPerceptron
    from gramtile.pipeline.parsing.convert import parse as parse


def __getattr__(name: str) -> Any:
    if name in _ESTIMATORS:
        return getattr(importlib.import_module(_ESTIMATORS[name]), name)
    raise AttributeError(f"module 'gramtile' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ESTIMATORS))
