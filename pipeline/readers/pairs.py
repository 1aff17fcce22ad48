"""What the readers of examples made of several texts (pairs of sentences) share."""
from __future__ import annotations

from gramtile.pipeline.representations.errors import CorpusFormatError


def _where(doc):
    path, _, line = (doc.source or "").rpartition(":")
    return (path or None), (int(line) if line.isdigit() else None)


def checked_labels(docs, allowed, policy, fix: str, column: str = "label"):
    """``docs`` whose label is one of ``allowed``; any other is handed to ``policy``, naming the
    file, the line and ``column``."""
    for d in docs:
        if d.label not in allowed:
            path, line = _where(d)
            policy.handle(CorpusFormatError(f"column {column!r}: {d.label!r} is not one of {list(allowed)}",
                                            path=path, line=line, fix=fix))
            continue
        yield d


def checked_targets(docs, low: float, high: float, policy, fix: str, column: str):
    """``docs`` whose target lies in ``[low, high]``; any other is handed to ``policy``."""
    for d in docs:
        if not low <= d.target <= high:
            path, line = _where(d)
            policy.handle(CorpusFormatError(f"column {column!r}: {d.target!r} is outside [{low:g}, {high:g}]",
                                            path=path, line=line, fix=fix))
            continue
        yield d
