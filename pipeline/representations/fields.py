"""Examples made of several texts: field names and the representation key of a field.

An example may hold several named texts (fields), e.g. ``question`` / ``answer`` or ``a`` / ``b``.
Each field's text gets the representations a single text gets, stored under the key
``<field>.<representation>`` (``question.ptree``): a representation key per field, so every
reader of a store's representations (``CorpusStore.load``, the tile tasks) addresses "the
``ptree`` of field ``question``" as it addresses ``ptree`` in a store of single texts.
"""
from __future__ import annotations

import re

from gramtile.pipeline.representations.errors import CorpusFormatError

#: Between a field's name and the name of one of its representations.
SEP = "."
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


def field_key(field: str, rep: str) -> str:
    """The representation key of ``rep`` of field ``field``: ``"question.ptree"``."""
    return f"{field}{SEP}{rep}"


def split_key(key: str, fields) -> tuple:
    """``(field, rep)`` of a representation key of a store whose fields are ``fields``;
    ``(None, key)`` for a key that names no field."""
    field, sep, rep = key.partition(SEP)
    if sep and field in fields and rep:
        return field, rep
    return None, key


def check_field_names(names, where: str = "fields", fix: str = "name the fields e.g. a,b or question,answer"):
    """``names`` as a list of distinct, valid field names (a letter, then letters, digits, ``_`` or
    ``-``; no ``.``, which separates a field from its representation); at least two."""
    names = list(names)
    for n in names:
        if not isinstance(n, str) or not _NAME.match(n):
            raise CorpusFormatError(f"{where}: {n!r} is not a field name (a letter, then letters, digits, _ or -)",
                                    fix=fix)
    if len(set(names)) != len(names):
        raise CorpusFormatError(f"{where}: field names {names} repeat a name", fix="give every field its own name")
    if len(names) < 2:
        raise CorpusFormatError(f"{where}: {names} is one field; fields are for examples of several texts",
                                fix="name two or more fields, or read single texts with the text column")
    return names
