"""Files that used to end in a traceback: unknown encodings, CR-only line ends, truncated gzip,
deeply nested JSON. Each is a CorpusFormatError naming the file (and line) and the fix."""
import gzip

import pytest

from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.errors import CorpusFormatError

TREE = "+1 |BT| (S (NP a) (VP b)) |ET|"


def test_an_unknown_encoding_is_named(tmp_path):
    p = tmp_path / "x.dat"
    p.write_text(TREE + "\n")
    with pytest.raises(CorpusFormatError, match="unknown text encoding 'utf-9'.*utf-8 or latin-1"):
        list(read(p, "svmlighttk", encoding="utf-9"))


def test_cr_only_line_ends_are_diagnosed_as_such(tmp_path):
    p = tmp_path / "x.dat"
    p.write_bytes((TREE + "\r" + TREE + "\r").encode())
    with pytest.raises(CorpusFormatError, match="CR only") as e:
        list(read(p, "svmlighttk"))
    assert e.value.line == 1 and str(p) in str(e.value)
    p.write_bytes((TREE + "\r\n" + TREE + "\r\n").encode())  # CRLF is fine
    assert len(list(read(p, "svmlighttk"))) == 2


def test_a_truncated_gzip_file_names_the_line_after_the_last_one_read(tmp_path):
    p = tmp_path / "x.dat.gz"
    p.write_bytes(gzip.compress(("\n".join([TREE] * 5000) + "\n").encode())[:-400])
    with pytest.raises(CorpusFormatError, match="truncated or damaged.*gzip -t"):
        list(read(p, "svmlighttk"))


def test_deeply_nested_json_is_a_record_error(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"id": "a", "text": "x"}\n' + '{"id": "b", "meta": ' + "[" * 100000 + "]" * 100000 + "}\n")
    with pytest.raises(CorpusFormatError, match="nested too deeply") as e:
        list(read(p, "jsonl"))
    assert e.value.line == 2
