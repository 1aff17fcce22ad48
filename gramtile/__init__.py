"""gramtile: tiled Gram matrices of structured NLP kernels.

The package is assembled from the repository's top-level folders:
``gramtile.kernels`` (kernels/), ``gramtile.pipeline`` (pipeline/), ``gramtile.workflows``
(workflows/). This module holds only the public entry points.
"""
__version__ = "0.1.0"


def gram(spec, X, Y=None):
    """In-memory Gram matrix for small inputs; see :func:`gramtile.pipeline.evaluate.gram`."""
    from gramtile.pipeline.evaluate import gram as _gram

    return _gram(spec, X, Y)
