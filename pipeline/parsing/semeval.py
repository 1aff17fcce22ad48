"""SemEval-2010 Task 8 examples: each record of the reader parsed by spaCy and built into its structures.

The reader (:mod:`gramtile.pipeline.readers.semeval`) yields :class:`SemEvalRecord` values
(text without tags, the two nominals' character spans, the directed label); this module parses
them and builds the four structures the relation kernels read (``relation``, ``path``, ``pet``,
``seq``). :func:`read_semeval2010` is the ``semeval`` format of :mod:`gramtile.pipeline.parsing.formats`.
"""
from __future__ import annotations

from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline.parsing.derive import dep_to_tree
from gramtile.pipeline.parsing.parse import doc_to_dep, load_model
from gramtile.pipeline.parsing.relation_build import (
    Mention,
    path_dep,
    path_enclosed_dep,
    relation_example,
    sentence_from_dep,
)
from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, make_policy
from gramtile.pipeline.readers.semeval import SemEvalRecord, read_semeval
from gramtile.pipeline.representations.structures import Document, TokenSeq


def record_structures(doc, rec: SemEvalRecord) -> dict:
    """The structures of one parsed record (spaCy ``doc`` of ``rec.text``).

    Returns
    -------
    dict
        ``"relation"`` relation example (roles arg1 / arg2 for e1 / e2, chunk Type NP),
        ``"path"`` shortest dependency path between the nominals' heads (DepTree),
        ``"pet"`` GRCT tree of the path-enclosed dependency subtree,
        ``"seq"`` the words from e1's start to e2's end (TokenSeq, lower-cased lemmas).
    """

    ms = []
    for name, (s, e) in (("e1", rec.e1), ("e2", rec.e2)):
        span = doc.char_span(s, e, alignment_mode="expand")
        if span is None or len(span) == 0:
            raise RepresentationError(f"record {rec.id}: {name} characters {s}:{e} cover no token")
        ms.append(Mention(span.start, span.end))
    if ms[1].start < ms[0].end:  # a token shared by both nominals (e.g. a hyphenated compound)
        ms[1] = Mention(ms[0].end, max(ms[1].end, ms[0].end + 1))
        if ms[1].end > len(doc):
            ms[0] = Mention(ms[0].start, ms[0].end - 1) if ms[0].end - ms[0].start > 1 else ms[0]
            ms[1] = Mention(ms[0].end, ms[0].end + 1)
    dep = doc_to_dep(doc)
    lem = [w.lower() for w in dep.lemmas]
    span = range(ms[0].start, ms[1].end)
    return {"relation": relation_example(sentence_from_dep(dep), ms[0], ms[1], ("arg1", "arg2")),
            "path": path_dep(dep, ms[0], ms[1]),
            "pet": dep_to_tree(path_enclosed_dep(dep, ms[0], ms[1])),
            "seq": TokenSeq([dep.words[t] for t in span], [lem[t] for t in span], [dep.pos[t] for t in span])}


def records_to_documents(records, path, nlp=None, batch_size: int = 256):
    """Parse records with spaCy (one Doc per sentence, sentences joined as in
    :mod:`gramtile.pipeline.parsing.parse`) and yield Documents with :func:`record_structures`."""

    nlp = nlp or load_model()
    records = list(records)
    for rec, doc in zip(records, nlp.pipe((r.text for r in records), batch_size=batch_size)):
        yield Document(id=f"semeval:{rec.id}", label=rec.label, text=rec.text,
                       structures=record_structures(doc, rec), source=f"{path}:{rec.line}")


def read_semeval2010(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """FORMATS reader ``semeval``: parsed Documents (label = the directed label) of a Task 8 file."""
    policy = make_policy(on_error, policy)
    return records_to_documents(read_semeval(path, policy, encoding=encoding), path)
