"""gramtile: tiled Gram matrices of structured NLP kernels.

The package is assembled from the repository's top-level folders:
``gramtile.kernels`` (kernels/), ``gramtile.pipeline`` (pipeline/), ``gramtile.workflows``
(workflows/). This module holds only the public entry points.
"""
from importlib.metadata import version

from gramtile.pipeline.compute.inmemory import gram

__version__ = version("gramtile")

__all__ = ["__version__", "gram"]
