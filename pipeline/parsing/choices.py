"""The input formats as plain names: every format ``read`` takes and the groups of formats that
take an option, for the command line's choices and checks without importing the readers.

:mod:`~gramtile.pipeline.parsing.formats` maps each name to its reader and takes the groups from
here; a test holds :data:`FORMAT_NAMES` equal to its table.
"""

#: every input format, in the order of :data:`gramtile.pipeline.parsing.formats.FORMATS`
FORMAT_NAMES = ("jsonl", "ptb", "svmlighttk", "kelp", "conllu", "dp", "trec", "text", "tsv", "csv", "parquet",
                "files", "conll04", "semeval", "inex", "senseval", "trec_qa_wang", "sick2014", "msrp")
#: Formats whose records always carry labels of their own (``labels=`` would replace them).
LABELLED_FORMATS = ("svmlighttk", "kelp", "trec", "conll04", "semeval", "inex", "senseval", "trec_qa_wang",
                    "sick2014", "msrp")
#: Formats that take the table options ``text_col``, ``label_col``, ``id_col``, ``fields``,
#: ``target_col``, ``group_col`` (and ``header``, tsv and csv).
TABLE_FORMATS = ("tsv", "csv", "parquet", "jsonl")
#: Formats whose examples are always made of several texts (their fields fixed by the format).
PAIR_FORMATS = ("trec_qa_wang", "sick2014", "msrp")
#: Formats that read examples of several texts with ``fields`` (and ``target_col``, ``group_col``).
FIELD_FORMATS = ("tsv", "csv", "jsonl")
