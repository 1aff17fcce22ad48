"""Every input format as a stream of :class:`~gramtile.pipeline.representations.structures.Document`.

The readers (:mod:`gramtile.pipeline.readers`) read records; for the two formats whose
Documents need built structures (``semeval``: a spaCy parse; ``conll04``: the rule chunker)
the format function here is the builder of :mod:`gramtile.pipeline.parsing.semeval` /
:mod:`gramtile.pipeline.parsing.conll04` over the reader's records.

``read(path, fmt)`` dispatches on the format name; ``FORMATS`` maps each name to its reader
function. All readers are generators taking ``policy`` (or ``on_error``), ``max_tokens`` and
``encoding``; some take format options (``ptb``: ``strip``; ``conllu``: ``pos``; ``trec``:
``label``).

================  =====================================================  ==========================
format            input                                                  Document
================  =====================================================  ==========================
``jsonl``         gramtile JSON lines (docs/formats.md)                       id, label, text, structures
``ptb``           PTB ``.mrg`` file or directory, multi-line trees       ``"tree"``
``svmlighttk``    ``<label> |BT| (tree) |ET|``                           label, ``"tree"``
``kelp``          KeLP ``.klp``/``.klp.gz``                              label, text, named trees, bow
``conllu``        CoNLL-U                                                id, text, ``"dep"``
``dp``            Malt-TAB ``.dp`` file or directory                     ``"dep"``
``trec``          ``COARSE:fine question`` (Latin-1)                     label, text
``text``          one sentence/document per line                         text
``tsv``           ``label<TAB>text``, or chosen columns (table options)   label, text, id
``csv``           CSV with chosen columns (table options)                label, text, id
``parquet``       parquet with chosen columns (needs pyarrow)            label, text, id
``files``         a folder of text files, class subfolders               label (folder), text, id
``conll04``       CoNLL04 SpERT split file (option ``relation``)         label, ``"relation"``
``semeval``       SemEval-2010 Task 8 ``TRAIN_FILE.TXT`` (spaCy parse)   label, text, 4 structures
``inex``          INEX ``CLASS:label(child ...)`` tag trees              label, ``"ptree"``, ``"tree"``
``senseval``      NLTK senseval ``.pos`` (option ``lemmas``)             label, text, ``"wsd"``, ``"seq"``
``trec_qa_wang``  TREC QA answer selection CSV ``qtext,label,atext``     fields question/answer, label, group
``sick2014``      SICK ``SICK_train.txt`` (tab-separated)                fields a/b, target, label, id
``msrp``          MSRP ``msr-para-*.tsv`` (tab-separated)                fields a/b, label
================  =====================================================  ==========================

The table formats (``tsv``, ``csv``, ``jsonl``) also read examples of several texts: ``fields``
names the field columns, ``target_col`` a real-valued target, ``group_col`` a group id
(:mod:`gramtile.pipeline.readers.table`).
"""
from __future__ import annotations

import inspect
from collections.abc import Iterator

from gramtile.pipeline.parsing.choices import FIELD_FORMATS, LABELLED_FORMATS, PAIR_FORMATS, TABLE_FORMATS  # noqa: F401
from gramtile.pipeline.parsing.conll04 import read_conll04
from gramtile.pipeline.parsing.semeval import read_semeval2010
from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, ErrorPolicy, make_policy
from gramtile.pipeline.readers.conll import read_conllu
from gramtile.pipeline.readers.folder import read_files
from gramtile.pipeline.readers.inex import read_inex
from gramtile.pipeline.readers.jsonl import read_jsonl, write_jsonl
from gramtile.pipeline.readers.kelp import read_kelp
from gramtile.pipeline.readers.labels import read_label_file, with_labels
from gramtile.pipeline.readers.malt import read_dp
from gramtile.pipeline.readers.msrp import read_msrp
from gramtile.pipeline.readers.parquet import read_parquet
from gramtile.pipeline.readers.plain import read_text, read_trec
from gramtile.pipeline.readers.ptb import read_ptb
from gramtile.pipeline.readers.senseval import read_senseval
from gramtile.pipeline.readers.sick2014 import read_sick2014
from gramtile.pipeline.readers.svmlighttk import read_svmlighttk
from gramtile.pipeline.readers.table import read_csv, read_tsv
from gramtile.pipeline.readers.trec_qa_wang import read_trec_qa_wang
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document

FORMATS = {
    "jsonl": read_jsonl,
    "ptb": read_ptb,
    "svmlighttk": read_svmlighttk,
    "kelp": read_kelp,
    "conllu": read_conllu,
    "dp": read_dp,
    "trec": read_trec,
    "text": read_text,
    "tsv": read_tsv,
    "csv": read_csv,
    "parquet": read_parquet,
    "files": read_files,
    "conll04": read_conll04,
    "semeval": read_semeval2010,
    "inex": read_inex,
    "senseval": read_senseval,
    "trec_qa_wang": read_trec_qa_wang,
    "sick2014": read_sick2014,
    "msrp": read_msrp,
}

__all__ = ["FORMATS", "ErrorPolicy", "read", "write_jsonl"] + [f.__name__ for f in FORMATS.values()]


def read(path, fmt: str, on_error: str = "raise", max_tokens: int | None = DEFAULT_MAX_TOKENS,
         policy: ErrorPolicy | None = None, labels=None, **options) -> Iterator[Document]:
    """Stream the Documents of a corpus file (or directory, for ``ptb`` and ``dp``).

    Parameters
    ----------
    path : str or Path
    fmt : str
        A key of :data:`FORMATS`.
    on_error : {"raise", "skip"}
        Used when ``policy`` is not given: stop at the first malformed record, or skip it.
    max_tokens : int or None
        Records with more tokens (leaves, words) are malformed; None disables the limit.
    policy : ErrorPolicy, optional
        Pass one to read its ``skipped`` list and ``report()`` afterwards.
    labels : path, optional
        A file of one label per line, one per record in order (:mod:`gramtile.pipeline.readers.labels`),
        for records that carry none of their own.
    **options
        Format options: ``encoding`` (all but parquet), ``strip`` (ptb), ``pos`` (conllu), ``label``
        (trec); ``text_col``, ``label_col``, ``id_col`` (tsv, csv, parquet, jsonl), ``fields``,
        ``target_col``, ``group_col`` (tsv, csv, jsonl) and ``header`` (tsv, csv),
        :mod:`gramtile.pipeline.readers.table`.

    Raises
    ------
    CorpusFormatError
        Unknown format or option (at once); malformed records while iterating in raise mode.
    """
    reader = FORMATS.get(fmt)
    if reader is None:
        raise CorpusFormatError(f"unknown format {fmt!r}", path=path,
                                fix=f"use one of {sorted(FORMATS)}")
    known = set(inspect.signature(reader).parameters) - {"path", "policy", "max_tokens", "on_error"}
    for key in options:
        if key not in known:
            raise CorpusFormatError(f"format {fmt!r} has no option {key!r}", path=path,
                                    fix=f"its options are {sorted(known)}")
    policy = make_policy(on_error, policy)
    if labels is None:
        return reader(path, policy=policy, max_tokens=max_tokens, **options)
    if fmt in LABELLED_FORMATS:
        raise CorpusFormatError(f"format {fmt!r} carries labels of its own; --labels (labels=) would replace them",
                                path=labels, fix="drop --labels")
    values = read_label_file(labels)
    return with_labels(lambda pol: reader(path, policy=pol, max_tokens=max_tokens, **options), values, labels, path,
                       policy)
