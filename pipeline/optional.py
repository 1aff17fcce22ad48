"""Heavy optional dependencies, each behind one small loader.

spaCy, distributed (and its cluster back ends), scikit-learn, gensim and matplotlib cost seconds to
import, and most commands need none or one of them: ``gramtile gram`` on the ``threads``
profile never imports distributed, ``gramtile status`` never imports spaCy. Every module of the
project that needs one of them calls its loader here at the point of use instead of importing
it at module top; everything else is imported at module top. A missing package is an error
naming the package to install.
"""
from __future__ import annotations

import importlib
import signal
import threading


def load(module: str, package: str | None = None):
    """Import ``module`` on first use; a missing one is an ImportError naming the pip package."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name.split(".")[0]):
            raise
        pkg = package or module.split(".")[0]
        raise ModuleNotFoundError(f"{module} is needed here but not installed. Fix: pip install {pkg}",
                                  name=e.name) from None


def spacy():
    """The ``spacy`` module (parsing raw text)."""
    return load("spacy")


def spacy_doc():
    """spaCy's ``Doc`` class (pretokenised input)."""
    return load("spacy.tokens", "spacy").Doc


def distributed():
    """The ``distributed`` module (Dask clusters: ``local``, ``scheduler``, ``slurm``, ...)."""
    return load("distributed", "distributed")


def dask_jobqueue():
    """``dask_jobqueue`` (the ``slurm`` profile).

    Importing it installs a SIGINT handler that exits with status 0 (its ``runner`` module), which
    would turn Ctrl-C into a silent, successful exit: the handler in place before is put back."""
    if threading.current_thread() is not threading.main_thread():
        return load("dask_jobqueue", "dask-jobqueue")
    before = signal.getsignal(signal.SIGINT)
    try:
        return load("dask_jobqueue", "dask-jobqueue")
    finally:
        if signal.getsignal(signal.SIGINT) is not before and before is not None:
            signal.signal(signal.SIGINT, before)


def dask_kubernetes_operator():
    """``dask_kubernetes.operator`` (the ``kubernetes`` profile)."""
    return load("dask_kubernetes.operator", "dask-kubernetes")


def sklearn(submodule: str):
    """A scikit-learn submodule, e.g. ``sklearn("svm").SVC``."""
    return load(f"sklearn.{submodule}" if submodule else "sklearn", "scikit-learn")


def word2vec():
    """gensim's ``Word2Vec`` class (vectors trained on a corpus; extra ``[word2vec]``)."""
    return load("gensim.models", "gensim").Word2Vec


def dask_array():
    """``dask.array`` (lazy views of a Gram store, :meth:`GramView.to_dask`)."""
    return load("dask.array", "dask")


def xarray():
    """``xarray`` (labelled views of a Gram store, :meth:`GramView.to_xarray`; extra ``[xarray]``)."""
    return load("xarray", "xarray")


def pyplot():
    """matplotlib's ``pyplot`` on the non-interactive Agg back end (plots written to files)."""
    matplotlib = load("matplotlib")
    matplotlib.use("Agg")
    return load("matplotlib.pyplot", "matplotlib")
