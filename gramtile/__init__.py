"""gramtile: tiled Gram matrices of structured NLP kernels.

The package is assembled from the repository's top-level folders:
``gramtile.kernels`` (kernels/), ``gramtile.pipeline`` (pipeline/), ``gramtile.workflows``
(workflows/). This module holds only the public entry points.
"""
import importlib
from importlib.metadata import version

from gramtile.pipeline.compute.inmemory import gram

__version__ = version("gramtile")

__all__ = ["__version__", "gram"]

# ---- scikit-learn estimators (issue 17), imported on first use: `import gramtile` stays fast ----
_ESTIMATORS = {"KernelSVC": "gramtile.pipeline.learn.estimator", "GramTransformer": "gramtile.pipeline.learn.estimator",
               "VotedPerceptron": "gramtile.pipeline.learn.perceptron", "SavedModel": "gramtile.pipeline.learn.models"}
__all__ += list(_ESTIMATORS)


def __getattr__(name):
    if name in _ESTIMATORS:
        return getattr(importlib.import_module(_ESTIMATORS[name]), name)
    raise AttributeError(f"module 'gramtile' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ESTIMATORS))
