"""Readers: records from corpus files, one module per format (no parsing, no spaCy).

Each reader is a generator of :class:`~gramtile.pipeline.representations.structures.Document`
(or, for ``semeval`` and ``conll04``, of that format's records). The format table and the
``read(path, fmt)`` dispatcher are :mod:`gramtile.pipeline.parsing.formats`, which adds the
builders of the formats whose structures need a parse.
"""
