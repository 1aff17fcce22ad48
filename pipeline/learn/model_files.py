"""Saved models, one way in: :func:`load_model` opens the model directory of any learner.

Every model directory ``gramtile train`` writes is in one format: ``model.json`` with
``"format": "gramtile-model"`` and a ``model`` field saying what it holds, the other files
listed with their sha256 in ``manifest.json`` (checked before any is read), and the kernel
checked against its recorded hash:

- ``"kernel"``: support examples and the coefficients of a kernel expansion over them (the SVM's
  dual coefficients, the voted perceptron's mistakes, ridge's, Nystroem's linear model folded
  onto its landmarks), with the corpus resources the kernel read
  (:class:`~gramtile.pipeline.learn.models.SavedModel`);
- ``"linear"``: weights over the feature ids of a feature store and what maps a new example onto
  them (:class:`~gramtile.pipeline.learn.linear_models.LinearModel`).

Both answer :meth:`predictions` for Documents (labels, decision scores, a line saying what it
took), the one path ``gramtile predict`` takes. Directories written before this format (kernel
models of format versions 1 and 2, linear models' ``linear.json``) load as they are.
"""
from __future__ import annotations

from pathlib import Path

from gramtile.pipeline.learn.linear_models import LinearModel, is_linear_model
from gramtile.pipeline.learn.models import MODEL_FILE, SavedModel
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.integrity import MANIFEST


def is_model_dir(directory) -> bool:
    """True when ``directory`` looks like a model directory of any learner (it may still be
    damaged: :func:`load_model` checks it)."""
    d = Path(directory)
    return d.is_dir() and ((d / MODEL_FILE).is_file() or is_linear_model(d) or (d / MANIFEST).is_file())


def load_model(directory) -> SavedModel | LinearModel:
    """The model saved in ``directory``, every file checked against its checksum first."""
    d = Path(directory)
    if not d.is_dir():
        raise StoreError(f"{d} is not a directory; pass a model directory written by `gramtile train --out`")
    return LinearModel.load(d) if is_linear_model(d) else SavedModel.load(d)
