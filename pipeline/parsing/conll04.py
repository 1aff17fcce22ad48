"""CoNLL04 relation examples: each candidate pair of the reader built into a Zelenko relation example.

The reader (:mod:`gramtile.pipeline.readers.conll04`) yields sentences with gold PoS and
entities and their candidate pairs; this module builds each pair's relation example with the
rule chunker of :mod:`gramtile.pipeline.parsing.relation_build` (no statistical parser).
:func:`read_conll04` is the ``conll04`` format of :mod:`gramtile.pipeline.parsing.formats`.
"""
from __future__ import annotations

from gramtile.pipeline.parsing.relation_build import Mention, TaggedSentence, relation_example
from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, check_path, make_policy
from gramtile.pipeline.readers.conll04 import SPLIT_FILES, candidate_pairs, load_split
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document


def read_conll04(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8",
                 relation: str = "Work_For"):
    """FORMATS reader: one Document per candidate pair of ``relation`` in a SpERT JSON split file.

    ``path`` is a split file inside the ``conll04`` folder (``json/train.CoNLL04.json``, ...). Each
    Document's label is ``"1"`` / ``"-1"`` and its structure ``"relation"`` the relation example built
    from gold PoS with nearest-host prepositional attachment (no parser), roles member /
    affiliation for ``Work_For`` and arg1 / arg2 otherwise.
    """

    path = check_path(path)
    policy = make_policy(on_error, policy)
    if path.is_file() and not path.read_bytes().strip():
        policy.handle(CorpusFormatError("empty file: it holds no records", path=path,
                                        fix="check that the right file was given and that it was written completely"))
        return
    split = {v: k for k, v in SPLIT_FILES.items()}.get(path.name)
    if split is None:
        raise CorpusFormatError(f"file name {path.name!r} is not a CoNLL04 split file", path=path,
                                fix=f"pass one of {sorted(SPLIT_FILES.values())} from the conll04/json folder")
    roles = ("member", "affiliation") if relation == "Work_For" else ("arg1", "arg2")
    for c in candidate_pairs(load_split(path.parent.parent, split), relation):
        s = c.sentence
        if max_tokens is not None and len(s.words) > max_tokens:
            policy.handle(CorpusFormatError(f"sentence has {len(s.words)} tokens, more than max_tokens={max_tokens}",
                                            path=path, fix="raise max_tokens"))
            continue
        others = [Mention(*e) for e in s.entities]
        rel = relation_example(TaggedSentence(s.words, s.pos), Mention(*c.head), Mention(*c.tail), roles, others)
        yield Document(id=f"{s.id}:{c.head[0]}-{c.head[1]}:{c.tail[0]}-{c.tail[1]}", label="1" if c.label else "-1",
                       text=" ".join(s.words), structures={"relation": rel}, source=s.source)
