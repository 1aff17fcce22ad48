"""What a user chooses among when learning, as plain names and numbers: the learners (each one's
one-line summary, task kinds and grid parameters), the task kinds, the SVM and linear solvers,
the linear loss and the SGD defaults.

The command line's options and help read them here, without importing the learners and their
libraries (scikit-learn, Numba, Zarr): ``gramtile evaluate --help`` starts at once. The solvers
(:mod:`~gramtile.pipeline.learn.solver`, :mod:`~gramtile.pipeline.learn.linear`) and the learner
protocol (:mod:`~gramtile.pipeline.learn.learners.base`) take their constants from here. The learner
table says what each learner class declares (``name``, ``summary_line``, ``task_kinds``,
``params``); a test holds it equal to the registry (:mod:`~gramtile.pipeline.learn.learners.registry`).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

#: the task kinds: labels to predict (``classification``), real targets to predict
#: (``regression``), or candidates to order within their group by real or 0/1 relevance targets,
#: higher score ranked higher (``ranking``)
TASKS = ("classification", "regression", "ranking")

#: the SVM solvers: ``libsvm`` (scikit-learn's SVC on kernel blocks in memory), ``smo``
#: (over kernel rows read through a bounded cache), ``auto`` (libsvm when its blocks fit the memory
#: budget, else smo)
SVM_SOLVERS = ("auto", "libsvm", "smo")
#: the linear learner's solvers: ``liblinear`` (LinearSVC in memory), ``sgd`` (over row chunks), ``auto``
LINEAR_SOLVERS = ("auto", "liblinear", "sgd")
#: liblinear's losses (LinearSVC's ``loss``); sgd always uses the hinge loss
LINEAR_LOSSES = ("squared_hinge", "hinge")
#: default SGD passes over the training rows
SGD_EPOCHS = 5
#: default rows per partial_fit call of SGD
SGD_CHUNK_ROWS = 20_000


@dataclass(frozen=True)
class GridOption:
    """A learner's grid parameter as the command line shows it: its name, option, help and default
    (``float`` or ``int``, as the learner's :class:`~gramtile.pipeline.learn.learners.base.Param`)."""

    name: str
    option: str
    help: str
    default: float | int

    @property
    def default_text(self) -> str:
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)


@dataclass(frozen=True)
class LearnerCard:
    """A learner as ``--model`` lists it: its name, one-line summary, task kinds and grid parameters."""

    name: str
    summary_line: str
    task_kinds: tuple[str, ...]
    params: tuple[GridOption, ...]


_C_SVM = GridOption("C", "--C", "the regularisation C (larger: closer fit to the training data)", 1.0)
_C_LINEAR = GridOption("C", "--C", "the linear SVM's C", 1.0)
_C_PENALTY = GridOption("C", "--C", "the SVM penalty (larger: fewer margin errors)", 1.0)
_ALPHA = GridOption("alpha", "--alpha", "the ridge penalty (larger: smoother)", 1.0)

#: name -> learner card, in the registry's order (read-only)
LEARNERS = MappingProxyType({c.name: c for c in (
    LearnerCard("svm", "SVC(kernel='precomputed') on kernel blocks, or the smo solver over kernel rows beyond memory",
                ("classification",), (_C_SVM,)),
    LearnerCard("perceptron", "the kernel voted perceptron (Freund and Schapire) on kernel blocks",
                ("classification",), (GridOption("epochs", "--epochs", "passes over the training data", 2),)),
    LearnerCard("nystroem", "a linear SVM on Nystroem features from K(examples, landmarks)",
                ("classification",), (_C_LINEAR, GridOption("landmarks", "--landmarks", "landmarks per split", 500))),
    LearnerCard("linear", "a linear SVM (LinearSVC, or SGD over row chunks) on a feature store's explicit features",
                ("classification",), (_C_LINEAR,)),
    LearnerCard("ridge", "kernel ridge classification (least squares on +-1 targets, one-vs-rest) on kernel blocks",
                ("classification",), (_ALPHA,)),
    LearnerCard("svr", "epsilon-support vector regression (libsvm's SVR) on kernel blocks", ("regression",),
                (_C_PENALTY, GridOption("epsilon", "--epsilon",
                                        "the half-width of SVR's insensitive tube, in target units", 0.1))),
    LearnerCard("krr", "kernel ridge regression (least squares on real targets) on kernel blocks", ("regression",),
                (_ALPHA,)),
    LearnerCard("rank", "pairwise preference ranking within groups (SVM-light -z p, no bias) on kernel blocks",
                ("ranking",), (_C_PENALTY,)),
)})


def names_for_task(task: str) -> list[str]:
    """The learners that learn the task kind ``task`` (``classification``, ``regression``, ``ranking``)."""
    return [n for n, c in LEARNERS.items() if task in c.task_kinds]
