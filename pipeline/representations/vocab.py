"""Corpus-level vocabularies: strings <-> int32 ids.

Ids are assigned in first-seen order, so encoding a corpus in a fixed order gives fixed ids.
A vocabulary only grows; ``truncate`` rolls back to an earlier size (used when a resumed
``prepare`` discards a shard that was not finished).
"""
from __future__ import annotations


class Vocab:
    def __init__(self, strings=()):
        self.strings: list[str] = []
        self.index: dict[str, int] = {}
        for s in strings:
            self.add(s)

    def add(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = len(self.strings)
            self.strings.append(s)
            self.index[s] = i
        return i

    def get(self, s: str, default: int = -1) -> int:
        return self.index.get(s, default)

    def __getitem__(self, i: int) -> str:
        return self.strings[i]

    def __len__(self):
        return len(self.strings)

    def __contains__(self, s):
        return s in self.index

    def truncate(self, size: int):
        for s in self.strings[size:]:
            del self.index[s]
        del self.strings[size:]

    def copy(self) -> Vocab:
        return Vocab(self.strings)

    def __eq__(self, other):
        return isinstance(other, Vocab) and self.strings == other.strings


class Vocabularies:
    """The named vocabularies of a corpus.

    ``sym`` holds every string attribute (tree labels, words, lemmas, PoS tags, relations), so
    one id means one string across representations; ``prod`` holds ordered-tree productions and
    ``pprod`` positional-tree productions (keys built from ``sym`` ids).
    """

    NAMES = ("sym", "prod", "pprod")

    def __init__(self, vocabs: dict | None = None):
        self.vocabs = {name: Vocab() for name in self.NAMES}
        if vocabs:
            for k, v in vocabs.items():
                self.vocabs[k] = v if isinstance(v, Vocab) else Vocab(v)

    def __getitem__(self, name) -> Vocab:
        return self.vocabs[name]

    @property
    def sym(self) -> Vocab:
        return self.vocabs["sym"]

    def sizes(self) -> dict:
        return {k: len(v) for k, v in self.vocabs.items()}

    def truncate(self, sizes: dict):
        for k, n in sizes.items():
            self.vocabs[k].truncate(n)

    def to_dict(self) -> dict:
        return {k: list(v.strings) for k, v in self.vocabs.items()}

    @staticmethod
    def from_dict(d) -> Vocabularies:
        return Vocabularies({k: Vocab(v) for k, v in d.items()})

    def copy(self) -> Vocabularies:
        return Vocabularies({k: v.copy() for k, v in self.vocabs.items()})
