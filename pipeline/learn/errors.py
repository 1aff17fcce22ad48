"""Errors of learning and evaluation input: folds, splits, labels, learner parameters."""

from gramtile.kernels.errors import GramtileError


class EvaluationError(GramtileError, ValueError):
    """Bad learning or evaluation input: folds, splits, labels, or a learner parameter."""


class PredictInputError(EvaluationError, TypeError):
    """An example given to a model (``SavedModel.predict``, ``KernelSVC``) is of a kind it cannot
    take, or lacks a representation the kernel reads."""
