"""The run of ``gramtile prepare`` (its options and help: :mod:`gramtile.workflows.commands.prepare`)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.compute.resource_builds import ensure
from gramtile.pipeline.parsing.choices import PAIR_FORMATS
from gramtile.pipeline.parsing.parse import MODEL_FIX, default_model_name
from gramtile.pipeline.progress import log
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.resources.keys import VECTORS, keys_for_option, keys_for_vectors_option, parse_option
from gramtile.pipeline.resources.vector_sources import check_available
from gramtile.pipeline.resources.vectors import CORPUS
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.storage import is_url, location
from gramtile.workflows.commands.running import check_output_file, runtime
from gramtile.workflows.datainput import needs_spacy, stdin_input
from gramtile.workflows.datainput import reader_options as data_options
from gramtile.workflows.errors import UsageError


def check_corpus_out(out):
    """A local --out must be absent, an empty folder, or a corpus store to resume (never a file or
    another folder: it would be written into or refused with a misleading fix later)."""
    if is_url(out):
        return
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UsageError(f"--out {p} is a file, not a corpus store. Fix: choose another --out (e.g. {p}.zarr)")
    if p.is_dir() and not (p / "zarr.json").exists():
        held = sorted(n for n in (c.name for c in p.iterdir()) if n != ".lock")
        if held:
            raise UsageError(f"--out {p} exists and is not a corpus store (it holds {held[:3]}). "
                             f"Fix: choose another --out")


def check_spacy_model(name):
    """The spaCy pipeline raw text needs is installed (checked without importing spaCy), before a
    cluster is started or a store created."""
    if name is None:
        default_model_name()  # raises, naming the fix, when none is installed
    elif importlib.util.find_spec(name) is None:
        raise RepresentationError(f"--spacy-model {name}: no such spaCy pipeline is installed. Fix: {MODEL_FIX}")


def run(args) -> int:
    check_corpus_out(args.out)
    reader_options = data_options(args)
    if needs_spacy(args.fmt, reader_options):
        check_spacy_model(args.spacy_model)
    if args.emit_jsonl:
        if "fields" in reader_options or args.fmt in PAIR_FORMATS:
            raise UsageError("--emit-jsonl writes one text per example; this input has several (fields). "
                             "Fix: drop --emit-jsonl")
        check_output_file(args.emit_jsonl, "--emit-jsonl", overwrite=None)  # a rerun rewrites it
    if args.resources is not None:
        parse_option(args.resources)  # a bad value fails before any parsing
    for source in args.vectors or ():
        check_available(source.partition("@")[0] if source.startswith(CORPUS) else source)
    if args.encoding:
        reader_options["encoding"] = args.encoding
    if args.trec_labels:
        if args.fmt != "trec":

            raise CorpusFormatError(f"--trec-labels applies to --format trec, not {args.fmt!r}",
                                    fix="drop --trec-labels")
        reader_options["label"] = args.trec_labels
    loc = location(args.out)
    existed = loc.exists()
    try:
        with stdin_input(args.input, args.fmt) as source:
            summary = prepare(source, args.fmt, args.out, shard_size=args.shard_size, cluster=runtime(args),
                              on_error=args.on_error, max_tokens=args.max_tokens,
                              emit_jsonl=args.emit_jsonl, model=args.spacy_model,
                              reader_options=reader_options, hdag=args.hdag, reps=args.reps)
    except CorpusFormatError:
        # bad input: the store this command created holds nothing a rerun could resume (the input must
        # change first, and with it the store's content), so it is removed; Ctrl-C keeps it to resume
        if not existed:
            loc.remove_all()
        raise
    quiet = getattr(args, "verbosity", 0) < 0
    # --quiet: the result line only; what was skipped is a warning
    print(summary.text().splitlines()[0] if quiet else summary.text())
    if quiet and summary.skipped:
        log.warning(f"{len(summary.skipped)} record(s) skipped:\n" + "\n".join(f"  {s['error']}" for s in summary.skipped))
    if args.resources is not None:
        build_resources(args.out, args.resources, quiet=quiet)
    for source in args.vectors or ():
        record_vectors(args.out, source, quiet=quiet)
    return 0


def build_resources(out, text: str, quiet: bool = False):
    """Build the ``--resources`` items into the (complete) corpus store ``out`` and print them
    (unless ``quiet``)."""
    _ensure(out, keys_for_option(text, CorpusStore.open(out).representations), "resource", "", " from", quiet)


def record_vectors(out, source: str, quiet: bool = False):
    """Record the vectors of ``--vectors SOURCE`` in the (complete) corpus store ``out`` and
    print them (unless ``quiet``)."""
    _ensure(out, keys_for_vectors_option(source, CorpusStore.open(out).representations), "vectors", VECTORS,
            " trained on", quiet)


def _ensure(out, keys, what: str, prefix: str, rep_word: str, quiet: bool):
    """Build or load ``keys`` in ``out`` and print one line per resource (unless ``quiet``)."""
    for group, r in ensure(out, keys).items():
        state = "built" if r["built"] else "already stored"
        rep = "" if r["rep"] is None else f"{rep_word} {r['rep']!r}"
        if not quiet:
            print(f"{what} {r['name'][len(prefix):]}{rep}: {state} ({group}, content hash {r['content_hash'][:16]})")
