"""SVM-Light-TK input: ``<label> |BT| (tree) [|BT| (tree) ...] |ET| [feature:value ...]``.

One example per line. The first tree becomes ``structures["tree"]``, further trees
``"tree2"``, ``"tree3"``, ...; the optional vector after ``|ET|`` becomes ``structures["bow"]``
(feature -> float). Consecutive bare tokens inside one node form a single leaf, as
SVM-Light-TK reads them (``(VB ask a)`` has the one leaf ``ask a``; docs/kernels.md, "Tree kernels: ST, SST, PT").
The label is kept as written (``"+1"``, ``"-1"``, ...).
"""
from __future__ import annotations

from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    check_tokens,
    feature_value,
    line_records,
    make_policy,
    parse_bracketed,
    record_id,
    source,
)
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document

FIX = "write each line as '<label> |BT| (tree) |ET|', e.g. '+1 |BT| (S (NN word)) |ET|'"


def read_svmlighttk(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read an SVM-Light-TK tree file (plain or gzip).

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of leaves per tree.
    encoding : str

    Yields
    ------
    Document
        ``id`` = ``"<stem>:<record number>"``, ``label`` as written, ``structures["tree"]``
        (and ``"tree2"``..., ``"bow"`` when present). Blank lines are not records.
    """
    policy = make_policy(on_error, policy)
    yield from line_records(path, policy, encoding, _document, max_tokens)


def _document(text, path, line, number, max_tokens):
    head, sep, rest = text.partition("|BT|")
    if not sep:
        raise CorpusFormatError("no '|BT|' marker", path=path, line=line, fix=FIX)
    label = head.strip()
    if not label or len(label.split()) != 1:
        raise CorpusFormatError(f"expected one label before '|BT|', found {label!r}", path=path, line=line, fix=FIX)
    trees_text, sep, vector = rest.partition("|ET|")
    if not sep:
        raise CorpusFormatError("no '|ET|' marker after the tree", path=path, line=line, fix=FIX)
    structures = {}
    for k, part in enumerate(trees_text.split("|BT|")):
        name = "tree" if k == 0 else f"tree{k + 1}"
        tree = parse_bracketed(part, path, line, what=name)
        check_tokens(len(tree.leaves()), max_tokens, path, line, "tree")
        structures[name] = tree
    if vector.strip():
        structures["bow"] = _vector(vector, path, line)
    return Document(id=record_id(path, number), label=label, structures=structures, source=source(path, line))


def _vector(text, path, line):
    bow = {}
    for item in text.split():
        feat, sep, value = item.rpartition(":")
        try:
            if not sep or not feat:
                raise ValueError
        except ValueError:
            raise CorpusFormatError(f"feature {item!r} after '|ET|' is not 'feature:value'", path=path, line=line,
                                    fix="write features as index:value pairs, e.g. 3:0.5") from None
        bow[feat] = feature_value(value, item, path, line, "write features as index:value pairs, e.g. 3:0.5")
    return bow
