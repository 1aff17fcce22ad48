"""Non-finite or overflowing feature values are malformed records, named by file and line."""
import numpy as np
import pytest

from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.errors import CorpusFormatError

TREE = "(S (NP a) (VP b))"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308", "1e309"])
@pytest.mark.parametrize("fmt", ["svmlighttk", "kelp"])
def test_non_finite_feature_values_are_refused_with_file_and_line(tmp_path, fmt, value):
    path = tmp_path / f"x.{fmt}"
    if fmt == "svmlighttk":
        path.write_text(f"+1 |BT| {TREE} |ET| 1:0.5\n-1 |BT| {TREE} |ET| 1:{value} 2:1\n")
    else:
        path.write_text(f"pos |BV:bow| a:1.0 |EV|\nneg |BV:bow| a:{value} |EV|\n")
    with pytest.raises(CorpusFormatError, match=rf"{path}, line 2: .*finite") as e:
        list(read(path, fmt))
    assert value in str(e.value)


def test_finite_feature_values_still_read(tmp_path):
    path = tmp_path / "x.svmlighttk"
    path.write_text(f"+1 |BT| {TREE} |ET| 1:0.5 2:-3e5\n")
    (doc,) = read(path, "svmlighttk")
    assert np.isclose(doc.structures["bow"]["2"], -3e5)
