"""Heavy optional dependencies, each behind one small loader.

spaCy, distributed (and its cluster back ends), scikit-learn, gensim and matplotlib cost seconds to
import, and most commands need none or one of them: ``gramtile gram`` on the ``threads``
profile never imports distributed, ``gramtile status`` never imports spaCy. Every module of the
project that needs one of them calls its loader here at the point of use instead of importing
it at module top; everything else is imported at module top.

Some of them are not installed by ``pip install gramtile`` but by an extra (:data:`EXTRAS`:
``gramtile[text]`` for spaCy, ``gramtile[plots]`` for matplotlib, ...). A missing package is a
:class:`MissingDependency`, one line naming the pip command that installs it (the extra's, when
an extra provides it); :func:`require` checks extras before a command starts its work, without
importing them.
"""
from __future__ import annotations

import importlib
import importlib.util
import signal
import threading

from gramtile.kernels.errors import GramtileError

#: The extras of ``pip install 'gramtile[EXTRA]'`` loaded here: extra -> (the module it provides,
#: the package's name, what needs it). pyproject.toml's [project.optional-dependencies] lists them.
EXTRAS = {
    "text": ("spacy", "spaCy", "parsing raw text"),
    "plots": ("matplotlib", "matplotlib", "writing plots"),
    "slurm": ("dask_jobqueue", "dask-jobqueue", "the slurm profile"),
    "xarray": ("xarray", "xarray", "an xarray view of a Gram store"),
    "parquet": ("pyarrow", "pyarrow", "parquet input"),
    "word2vec": ("gensim", "gensim", "word2vec vectors trained on a corpus"),
}
_EXTRA_OF = {module: extra for extra, (module, _, _) in EXTRAS.items()}


class MissingDependency(GramtileError, ModuleNotFoundError):
    """An optional package a step needs is not installed; the message names the pip command."""


def pip_command(*extras: str) -> str:
    """``pip install 'gramtile[a,b]'``: the command that installs ``extras``."""
    return f"pip install 'gramtile[{','.join(extras)}]'"


def available(extra: str) -> bool:
    """Whether the package of ``extra`` is installed (found, not imported)."""
    try:
        return importlib.util.find_spec(EXTRAS[extra][0]) is not None
    except (ImportError, ValueError):  # a module blocked or half-installed: not usable
        return False


def require(*extras: str, then: str = "") -> None:
    """Refuse, before any work, a step whose extras are not all installed: one
    :class:`MissingDependency` naming what is missing and the pip command (followed by ``then``)."""
    missing = [e for e in extras if not available(e)]
    if missing:
        what = ", ".join(f"{EXTRAS[e][2]} needs {EXTRAS[e][1]}" for e in missing)
        which = "which is" if len(missing) == 1 else "which are"
        raise MissingDependency(f"{what}, {which} not installed. Fix: {pip_command(*missing)}{then}",
                                name=EXTRAS[missing[0]][0])


def load(module: str, package: str | None = None):
    """Import ``module`` on first use; a missing one is a :class:`MissingDependency` naming the pip
    command (``pip install 'gramtile[EXTRA]'`` when an extra installs it, else ``pip install PACKAGE``)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name.split(".")[0]):
            raise
        top = module.split(".")[0]
        extra = _EXTRA_OF.get(top)
        fix = pip_command(extra) if extra else f"pip install {package or top}"
        raise MissingDependency(f"{module} is needed here but not installed. Fix: {fix}", name=e.name) from None


def spacy():
    """The ``spacy`` module (parsing raw text; extra ``[text]``)."""
    return load("spacy")


def spacy_doc():
    """spaCy's ``Doc`` class (pretokenised input; extra ``[text]``)."""
    return load("spacy.tokens", "spacy").Doc


def distributed():
    """The ``distributed`` module (Dask clusters: ``local``, ``scheduler``, ``slurm``, ...)."""
    return load("distributed", "distributed")


def dask_jobqueue():
    """``dask_jobqueue`` (the ``slurm`` profile; extra ``[slurm]``).

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
    """matplotlib's ``pyplot`` on the non-interactive Agg back end (plots written to files; extra ``[plots]``)."""
    matplotlib = load("matplotlib")
    matplotlib.use("Agg")
    return load("matplotlib.pyplot", "matplotlib")
