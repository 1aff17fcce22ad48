"""Type information of the public API: the PEP 561 marker ships, and the public signatures that
`make lint`'s mypy checks stay annotated (mypy checks their bodies only while they are)."""
import inspect
from pathlib import Path

import pytest
import tomllib

import gramtile
from gramtile.pipeline.compute.engine import _check_out, _open_corpus, _selection, run_gram
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.estimator import GramTransformer, KernelRanker, KernelSVC, KernelSVR

REPO = Path(__file__).resolve().parents[2]


def test_py_typed_is_package_data():
    assert (REPO / "gramtile" / "py.typed").is_file()
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data["gramtile"]


def unannotated(fn) -> list[str]:
    """Parameters of ``fn`` without an annotation, and "return" when its return type is missing."""
    sig = inspect.signature(fn)
    missing = [name for name, p in sig.parameters.items()
               if name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


PUBLIC = [run_gram, _open_corpus, _selection, _check_out, Runtime.__init__, Runtime.of, Runtime.with_settings, Runtime.task_memory,
          Runtime.worker_memory_mb, Runtime.close, KernelSVC.__init__, KernelSVC.fit, KernelSVC.predict,
          KernelSVC.decision_function, KernelSVC.predict_proba, KernelSVC.get_params, KernelSVC.set_params,
          GramTransformer.__init__, GramTransformer.fit, GramTransformer.transform,
          KernelSVR.__init__, KernelSVR.fit, KernelSVR.predict, KernelSVR.decision_function,
          KernelRanker.__init__, KernelRanker.fit, KernelRanker.predict, KernelRanker.score]


@pytest.mark.parametrize("fn", PUBLIC, ids=[f.__qualname__ for f in PUBLIC])
def test_public_signatures_are_annotated(fn):
    assert unannotated(fn) == []


def test_the_check_finds_a_missing_annotation():
    def half(a: int, b, c: str = "") -> None: ...

    def nothing(a: int): ...

    assert unannotated(half) == ["b"]
    assert unannotated(nothing) == ["return"]


def test_estimators_are_visible_to_type_checkers_and_still_lazy():
    """gramtile's estimators are imported on first use; its TYPE_CHECKING imports give them types."""
    assert gramtile.KernelSVC is KernelSVC and gramtile.GramTransformer is GramTransformer
    source = (REPO / "gramtile" / "__init__.py").read_text()
    for name in ("KernelSVC", "GramTransformer", "KernelSVR", "KernelRanker", "VotedPerceptron", "SavedModel"):
        assert f"import {name} as {name}" in source
