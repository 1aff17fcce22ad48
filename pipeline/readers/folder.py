"""A folder of text files, one example per file, as scikit-learn's ``load_files`` reads them:

* ``ROOT/LABEL/FILE``: each subfolder is a class, named by the folder; every file in it is one
  example of that class;
* ``ROOT/FILE``: a folder with no subfolders gives unlabelled examples.

Files and folders whose names start with ``.`` are ignored. Each file's whole text is one example
(id = its path below ``ROOT``, e.g. ``pos/001.txt``), parsed by spaCy later. Anything else is an
error naming the file: a file beside class folders (it would have no class), a folder inside a class
folder, an empty class folder, a file that is not text in the encoding, or an empty file.
"""
from __future__ import annotations

from pathlib import Path

from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, check_path, check_text, guarded, make_policy
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document


def _entries(folder: Path):
    return sorted((e for e in folder.iterdir() if not e.name.startswith(".")), key=lambda e: e.name)


def _document(f: Path, root: Path, label, encoding, max_tokens):
    raw = f.read_bytes()
    nul = raw.find(b"\x00") if "16" not in encoding and "32" not in encoding else -1
    if nul >= 0:
        raise CorpusFormatError(f"NUL byte at byte offset {nul}: this is a binary file, not text", path=f,
                                line=raw.count(b"\n", 0, nul) + 1,
                                fix="keep only text files in the folder (or remove this one)")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise CorpusFormatError(f"invalid {encoding} byte 0x{raw[e.start:e.start + 1].hex().upper()} at column {col}",
                                path=f, line=line,
                                fix="re-encode the file as UTF-8 (e.g. iconv -f latin-1 -t utf-8), or pass "
                                    "--encoding latin-1 if that is the folder's encoding") from None
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise CorpusFormatError("empty document: the file holds no text", path=f,
                                fix="remove the file or write its text")
    check_text(text, max_tokens, f, None, "document")
    return Document(id=f.relative_to(root).as_posix(), label=label, text=text.strip(), source=str(f))


def read_files(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read a folder of text files (module docstring) into Documents.

    Yields
    ------
    Document
        ``id`` = the file's path below the folder, ``label`` = its class folder (or none),
        ``text`` = the file's text; ``source`` = the file.
    """
    policy = make_policy(on_error, policy)
    root = check_path(path)
    if not root.is_dir():
        raise CorpusFormatError("is a file, not a folder", path=root,
                                fix="pass the folder that holds one file per example (or its class folders)")
    entries = _entries(root)
    folders = [e for e in entries if e.is_dir()]
    files = [e for e in entries if not e.is_dir()]
    if not entries:
        raise CorpusFormatError("the folder holds no files", path=root,
                                fix="pass a folder of text files, or of class folders holding them")
    if folders and files:
        raise CorpusFormatError(f"the folder holds class folders ({', '.join(e.name for e in folders[:3])}) and "
                                f"files beside them ({', '.join(e.name for e in files[:3])}): such a file has no class",
                                path=files[0], fix="move the file into a class folder, or remove it")
    groups = [(d, d.name) for d in folders] if folders else [(root, None)]
    for folder, label in groups:
        inside = _entries(folder)
        if not inside:
            policy.handle(CorpusFormatError(f"class folder {label!r} holds no files", path=folder,
                                            fix="put its examples in it, or remove the folder"))
            continue
        for f in inside:
            if f.is_dir():
                policy.handle(CorpusFormatError(
                    "a folder inside a class folder: classes are one level of folders", path=f,
                    fix="move its files up into the class folder, or remove it"))
                continue
            doc = guarded(policy, _document, f, root, label, encoding, max_tokens)
            if doc is not None:
                yield doc
