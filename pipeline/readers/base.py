"""What every corpus reader shares: the error policy, line-numbered text input, record limits.

Readers are generators of :class:`~gramtile.pipeline.representations.structures.Document`. A malformed record
becomes a :class:`~gramtile.kernels.errors.CorpusFormatError` naming the file, the line, the
offending value and the fix; the reader hands it to an :class:`ErrorPolicy`, which either
raises it (the default) or records it and lets the reader go on with the next record.
"""
from __future__ import annotations

import codecs
import gzip
import math
import re
import zlib
from pathlib import Path

from gramtile.pipeline.representations.brackets import BracketError, parse_tree
from gramtile.pipeline.representations.errors import CorpusFormatError

DEFAULT_MAX_TOKENS = 1000
MAX_TOKENS_FIX = "split it, or raise --max-tokens (max_tokens=) if the kernels should see it whole"
#: Characters spaCy parses in one text (``nlp.max_length`` of its pipelines, 1,000,000 by default;
#: longer texts end in its error E088). Raw text read for parsing is checked against it here, with
#: its file and line, and :func:`gramtile.pipeline.parsing.parse.parse_deps` checks the loaded
#: pipeline's own value before parsing.
PARSER_MAX_CHARS = 1_000_000


class ErrorPolicy:
    """What a reader does with a malformed record.

    Parameters
    ----------
    mode : {"raise", "skip"}
        ``"raise"`` stops at the first bad record; ``"skip"`` records the error in
        :attr:`skipped` and lets the reader continue with the next record.
    """

    MODES = ("raise", "skip")

    def __init__(self, mode: str = "raise"):
        if mode not in self.MODES:
            raise CorpusFormatError(f"unknown on_error mode {mode!r}",
                                    fix=f"use one of {list(self.MODES)}")
        self.mode = mode
        self.skipped: list[CorpusFormatError] = []

    def handle(self, err: CorpusFormatError) -> None:
        """Raise ``err`` (mode "raise") or remember it (mode "skip")."""
        if self.mode == "raise":
            raise err
        self.skipped.append(err)

    def report(self) -> str:
        """One line per skipped record, after a count; ``""`` when nothing was skipped."""
        if not self.skipped:
            return ""
        lines = [f"{len(self.skipped)} record(s) skipped:"]
        lines += [f"  {e}" for e in self.skipped]
        return "\n".join(lines)

    def __repr__(self):
        return f"ErrorPolicy(mode={self.mode!r}, skipped={len(self.skipped)})"


def make_policy(on_error: str = "raise", policy: ErrorPolicy | None = None) -> ErrorPolicy:
    """The policy a reader uses: ``policy`` when given (so the caller can read its report)."""
    return policy if policy is not None else ErrorPolicy(on_error)


def record_id(path, number: int) -> str:
    """Default document id ``"<file stem>:<record number>"`` (1-based record number).

    The stem drops ``.gz`` and then one more suffix, so ``train.klp.gz`` gives ``train``.
    """
    name = Path(path).name
    if name.endswith(".gz"):
        name = name[:-3]
    stem = Path(name).stem or name
    return f"{stem}:{number}"


def source(path, line: int) -> str:
    return f"{path}:{line}"


def check_path(path) -> Path:
    """``path`` as a :class:`Path`, or a CorpusFormatError when it does not exist."""
    p = Path(path)
    if not p.exists():
        raise CorpusFormatError("no such file or directory", path=p,
                                fix="check the path (relative paths start at the current directory)")
    return p


def files_in(path, suffixes: tuple[str, ...]) -> list[Path]:
    """``[path]`` for a file; the sorted files of a directory whose names end in ``suffixes``."""
    p = check_path(path)
    if p.is_file():
        return [p]
    files = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(suffixes))
    if not files:
        raise CorpusFormatError(f"directory holds no {'/'.join(suffixes)} files", path=p,
                                fix="point at a file, or at a directory of such files")
    return files


def _open_binary(path: Path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def _numbered(f, path):
    """``enumerate(f, 1)`` that turns a truncated gzip stream into a CorpusFormatError."""
    number = 0
    try:
        for number, raw in enumerate(f, 1):
            yield number, raw
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise CorpusFormatError(f"compressed file is truncated or damaged after line {number} ({e})", path=path,
                                line=number + 1, fix="download or copy the .gz file again (gzip -t checks it)")\
            from None


def lines(path, policy: ErrorPolicy, encoding: str = "utf-8"):
    """Decoded lines of a text file (plain or gzip), with 1-based line numbers.

    Yields
    ------
    (int, str or None)
        Line number and the line without its line ending. A line that cannot be decoded is
        handed to ``policy`` as a CorpusFormatError naming the line and byte offset; in skip
        mode it is yielded as ``None`` so a multi-line record containing it can be dropped.

    A line holding a NUL byte (a binary file) is handed to ``policy`` like an undecodable one.
    A file with no non-blank line raises (or, in skip mode, records) "empty file".
    """
    path = check_path(path)
    if path.is_dir():
        raise CorpusFormatError("is a directory, not a file", path=path,
                                fix="pass one file (the formats 'ptb' and 'dp' also read directories)")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise CorpusFormatError(f"unknown text encoding {encoding!r}", path=path,
                                fix="pass a Python codec name such as utf-8 or latin-1") from None
    seen_text = False
    offset = 0  # byte offset of the current line's start, for the decode error message
    with _open_binary(path) as f:
        for number, raw in _numbered(f, path):
            if number == 1 and b"\r" in raw.rstrip(b"\r\n") and b"\n" not in raw:
                raise CorpusFormatError(
                    "the file ends its lines with CR only (old Mac style), so it reads as one line", path=path,
                    line=1, fix="convert the line ends to LF, e.g. tr '\\r' '\\n' < IN > OUT")
            nul = raw.find(b"\x00") if "16" not in encoding and "32" not in encoding else -1
            if nul >= 0:
                policy.handle(CorpusFormatError(
                    f"NUL byte at byte offset {offset + nul}: this is a binary file, not text",
                    path=path, line=number, fix="pass the corpus file itself (a text file), or check that it was "
                                                "copied completely"))
                offset += len(raw)
                seen_text = True
                yield number, None
                continue
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as e:
                bad = raw[e.start:e.start + 1]
                policy.handle(CorpusFormatError(
                    f"invalid {encoding} byte 0x{bad.hex().upper()} at byte offset {offset + e.start} "
                    f"(column {e.start + 1} of the line's bytes)", path=path, line=number,
                    fix="re-encode the file as UTF-8 (e.g. iconv -f latin-1 -t utf-8), "
                        "or pass encoding='latin-1' if that is its encoding"))
                offset += len(raw)
                seen_text = True
                yield number, None
                continue
            offset += len(raw)
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]  # a UTF-8 byte-order mark is not part of the first record
            text = text.rstrip("\r\n")
            if not seen_text and text.strip():
                seen_text = True
            yield number, text
    if not seen_text:
        policy.handle(CorpusFormatError("empty file: it holds no records", path=path,
                                        fix="check that the right file was given and that it was written completely"))


def blocks(path, policy: ErrorPolicy, encoding: str = "utf-8"):
    """Blank-line separated blocks of lines (CoNLL-U, Malt-TAB).

    Yields
    ------
    list of (int, str or None)
        The numbered lines of one block; a ``None`` line could not be decoded (already
        reported to ``policy``).
    """
    block = []
    for number, text in lines(path, policy, encoding):
        if text is not None and not text.strip():
            if block:
                yield block
                block = []
        else:
            block.append((number, text))
    if block:
        yield block


def check_tokens(n: int, max_tokens: int | None, path, line: int, what: str = "sentence") -> None:
    """Raise when a record has no tokens or more than ``max_tokens``.

    Kernels are quadratic (or worse) in the size of a structure, so one runaway record (a
    whole document on one line, a parser failure) can dominate a Gram matrix's run time.
    """
    if n == 0:
        raise CorpusFormatError(f"empty {what}: it has no tokens", path=path, line=line,
                                fix=f"remove the empty {what} or give it at least one token")
    if max_tokens is not None and n > max_tokens:
        raise CorpusFormatError(f"{what} has {n} tokens, more than max_tokens={max_tokens}",
                                path=path, line=line, fix=MAX_TOKENS_FIX)


_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def tsv_field(x) -> str:
    """``x`` as one field of a TSV line gramtile writes: a backslash, tab, newline or carriage
    return becomes a backslash followed by a backslash, t, n or r (the escapes of PostgreSQL's and
    MySQL's text format), so an id or label holding them never splits a line or a column."""
    return str(x).translate(_TSV_ESCAPES)


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_encodable(value: str, where: str, path=None, line=None) -> str:
    """``value``, refused when it holds half of a UTF-16 surrogate pair (a lone surrogate: what a
    \\u escape without its other half, or bytes decoded with ``surrogateescape``, give), which no
    text encoding can store; the record is refused, not altered."""
    m = _SURROGATE.search(value)
    if m is not None:
        raise CorpusFormatError(f"{where} holds {m.group()!r} at character {m.start()}, half of a UTF-16 surrogate pair, "
                                "which no text encoding can store; the record is refused, not altered", path=path,
                                line=line, fix="give the whole character (both halves) or remove it; text read with "
                                               "errors='surrogateescape' should be decoded with the file's encoding")
    return value


def check_text(text: str, max_tokens: int | None, path, line: int, what: str = "text") -> None:
    """:func:`check_tokens` for raw text that spaCy will parse: its tokens (split on whitespace)
    against ``max_tokens``, and its characters against :data:`PARSER_MAX_CHARS`, so the advice to
    raise ``--max-tokens`` is given only where the parser can take the text."""
    words = text.split()
    n = len(words)
    chars = sum(map(len, words)) + max(0, n - 1)  # as the parser receives it: words joined by one space
    if chars > PARSER_MAX_CHARS:
        raise CorpusFormatError(f"{what} has {chars:,} characters ({n:,} tokens), more than the "
                                f"{PARSER_MAX_CHARS:,} spaCy parses in one text (nlp.max_length)", path=path,
                                line=line, fix="split it into shorter texts (no --max-tokens lets spaCy parse it)")
    check_tokens(n, max_tokens, path, line, what)


def head_problem(heads) -> tuple[int, str] | None:
    """First problem of a 0-based head list as ``(word index, reason)``, or None for a tree.

    Unlike :func:`~gramtile.pipeline.representations.structures.validate_heads` this returns the offending
    word, so readers can point at the line that holds it.
    """
    n = len(heads)
    for i, h in enumerate(heads):
        if h < -1 or h >= n:
            return i, f"head {h + 1} (1-based) is outside the sentence of {n} words"
        if h == i:
            return i, "the word is its own head"
    # no root at all needs no test of its own: every word then leads into a cycle, found below
    roots = [i for i, h in enumerate(heads) if h == -1]
    if len(roots) > 1:
        return roots[1], f"second root (words {[r + 1 for r in roots[:5]]} all have head 0)"
    state = [0] * n  # 0 unseen, 1 on the current path, 2 known to reach the root
    for s in range(n):
        path = []
        v = s
        while v != -1 and state[v] == 0:
            state[v] = 1
            path.append(v)
            v = heads[v]
        if v != -1 and state[v] == 1:
            cycle = path[path.index(v):]
            return v, f"dependency cycle through words {[c + 1 for c in cycle[:10]]} (1-based)"
        for u in path:
            state[u] = 2
    return None


HEAD_FIX = ("give every word a head inside the sentence (1-based, 0 for the root), "
            "with exactly one root and no cycle")


def parse_bracketed(text: str, path, line: int, what: str = "tree", root_label=None):
    """Parse a bracket string read from ``path`` at ``line`` into a Tree.

    A :class:`~gramtile.pipeline.representations.brackets.BracketError` becomes a CorpusFormatError whose line
    is the one holding the offending character (trees may span several lines).
    """

    if not text.strip():
        raise CorpusFormatError(f"empty {what}: no bracketed tree", path=path, line=line,
                                fix="remove the record or give it a tree such as (S (NN word))")
    try:
        return parse_tree(text, root_label=root_label)
    except BracketError as e:
        at = line + text.count("\n", 0, e.pos)
        snippet = text[max(0, e.pos - 30):e.pos + 10].replace("\n", " ")
        raise CorpusFormatError(f"malformed {what}: {e} (near {snippet!r})", path=path, line=at,
                                fix="balance the brackets: every '(' needs its ')' and every node "
                                    "a label, as in (S (NP (DT the) (NN dog)) (VP (VBZ barks)))") from None


def guarded(policy: ErrorPolicy, make, *args):
    """``make(*args)``, or None after handing its CorpusFormatError to ``policy``."""
    try:
        return make(*args)
    except CorpusFormatError as e:
        policy.handle(e)
        return None


def line_records(path, policy: ErrorPolicy, encoding: str, make, max_tokens):
    """Documents of a one-record-per-line file: ``make(text, path, line, number, max_tokens)``
    for each non-blank line (``number`` counts records from 1); blank lines are not records, and a
    line that fails to decode or to parse goes to ``policy``."""
    number = 0
    for line, text in lines(path, policy, encoding):
        if text is not None and not text.strip():
            continue
        number += 1
        if text is None:
            continue
        doc = guarded(policy, make, text, path, line, number, max_tokens)
        if doc is not None:
            yield doc


#: Largest feature value magnitude accepted: products and sums of two such values stay finite.
MAX_FEATURE_VALUE = 1e100


def feature_value(text: str, item: str, path, line, fix: str) -> float:
    """The float of a feature value ``text`` (from entry ``item``); NaN, infinities and magnitudes
    above :data:`MAX_FEATURE_VALUE` (whose products overflow inside a kernel) are malformed.

    Raises
    ------
    CorpusFormatError
        Naming the file, the line and the entry.
    """
    try:
        v = float(text)
    except ValueError:
        raise CorpusFormatError(f"entry {item!r}: {text!r} is not a number", path=path, line=line, fix=fix) from None
    if not math.isfinite(v) or abs(v) > MAX_FEATURE_VALUE:
        raise CorpusFormatError(f"entry {item!r}: value {text!r} is not a finite number of magnitude at most "
                                f"{MAX_FEATURE_VALUE:g}", path=path, line=line,
                                fix="write finite feature values (no nan/inf); rescale very large ones")
    return v
