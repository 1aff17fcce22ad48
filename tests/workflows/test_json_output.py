"""Outputs written as JSON (results.json of evaluate, predict's JSON) are streamed to a temporary
file and renamed: the same bytes as ``json.dumps(obj, indent=1)``, never a truncated file."""
import json

import numpy as np
import pytest

from gramtile.workflows.commands.running import write_json_atomic


def test_streamed_json_is_the_same_text_as_dumps(tmp_path):
    rng = np.random.default_rng(0)
    obj = {"rows": [{"C": 1.0, "accuracy": 0.5, "kernel": "normalized(st(lam=0.4))"}],
           "predictions": {"linear C=1": {"row": rng.permutation(1000).tolist(),
                                          "predicted": [str(x) for x in rng.integers(0, 3, 1000)],
                                          "gold": ["a\u00e9\"b"] * 1000}},
           "nested": {"empty": [], "none": None, "nan_free": [1, 2.5, -3e-12]}}
    out = tmp_path / "results.json"
    write_json_atomic(out, obj)
    assert out.read_text(encoding="utf-8") == json.dumps(obj, indent=1)
    assert json.loads(out.read_text(encoding="utf-8")) == obj
    assert not (tmp_path / "results.json.partial").exists()


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path):
    out = tmp_path / "results.json"
    out.write_text('{"old": true}', encoding="utf-8")

    class Unserialisable:
        pass

    with pytest.raises(TypeError):
        write_json_atomic(out, {"rows": [1, 2], "bad": Unserialisable()})
    assert out.read_text(encoding="utf-8") == '{"old": true}'
    assert not (tmp_path / "results.json.partial").exists()
