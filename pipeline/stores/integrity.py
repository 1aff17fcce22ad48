"""Checksums of everything a number is read from, outside K's chunks (which carry crc32c).

One rule (docs/reliability.md, "Integrity"): every file or array whose content can change a
result carries a sha256 recorded when it was written and checked when it is read, once per
open. This module holds the two shapes of that rule that are not specific to one store:

- **a manifest of a folder** (model directories): ``manifest.json`` lists the sha256 of every
  other file of the folder, written last (after every file it lists), checked by
  :func:`check_manifest` before any of them is parsed, so a damaged, truncated or emptied file is
  one line naming it, never a decode error of the file itself;
- **a sha256 of a JSON attribute** (:func:`attr_sha256`): a store's description (sizes, ids,
  landmark positions, shard hashes) bound to itself, so an edited or bit-flipped attribute is
  refused instead of read.

A mismatch raises :class:`StoreCorruptError` naming the file and the fix.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import uuid
from pathlib import Path

from gramtile.pipeline.checksums import file_sha256
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError
from gramtile.pipeline.stores.locks import pid_alive

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "gramtile-manifest"
#: attribute key holding the sha256 of the rest of an attribute (:func:`attr_sha256`)
ATTR_HASH = "attr_sha256"


def write_manifest(directory, skip=()) -> dict:
    """Write ``manifest.json`` into ``directory``: the sha256 of every other regular file in it
    (recursively, by relative path with ``/``), except those named in ``skip``. Call it last,
    once every file is written. Returns the file table."""
    d = Path(directory)
    files = {}
    for root, dirs, names in os.walk(d):
        dirs.sort()
        for name in sorted(names):
            p = Path(root) / name
            rel = p.relative_to(d).as_posix()
            if rel == MANIFEST or rel in skip:
                continue
            files[rel] = file_sha256(p)
    text = json.dumps({"format": MANIFEST_FORMAT, "files": files}, indent=1, sort_keys=True)
    tmp = d / (MANIFEST + ".partial")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, d / MANIFEST)
    return files


def read_manifest(directory, what: str, fix_legacy: str, fix: str) -> dict:
    """The file table of ``directory``'s manifest.

    Raises
    ------
    StoreCorruptError
        No manifest (``fix_legacy`` is the fix: a folder written before manifests existed), or one
        that does not parse (``fix``).
    """
    d = Path(directory)
    p = d / MANIFEST
    if not p.is_file():
        raise StoreCorruptError(f"{what} {d} has no {MANIFEST} (the checksums of its files; written before "
                                f"they existed, or its writer was interrupted). Fix: {fix_legacy}")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        files = doc["files"]
        if doc.get("format") != MANIFEST_FORMAT or not isinstance(files, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and len(v) == 64 for k, v in files.items()):
            raise ValueError("not a gramtile manifest")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise StoreCorruptError(f"{p} is damaged ({type(e).__name__}: {e}), so the files of {what} {d} cannot be "
                                f"checked. Fix: {fix}") from None
    return files


def check_manifest(directory, what: str, fix_legacy: str, fix: str, required=()) -> dict:
    """Check every file ``directory``'s manifest lists against its sha256 (and that the files
    ``required`` are listed). Returns the file table.

    Raises
    ------
    StoreCorruptError
        A file missing or different from its recorded sha256, a required file unlisted, or the
        manifest missing or damaged; one line naming the file and the fix.
    """
    d = Path(directory)
    files = read_manifest(d, what, fix_legacy, fix)
    for name in required:
        if name not in files:
            raise StoreCorruptError(f"{d / MANIFEST} does not list {name} (damaged or edited). Fix: {fix}")
    for name, want in sorted(files.items()):
        p = d / name
        try:
            got = file_sha256(p)
        except FileNotFoundError:
            raise StoreCorruptError(f"{p} is missing from {what} {d} (its {MANIFEST} lists it). Fix: {fix}") from None
        except OSError as e:
            raise StoreCorruptError(f"{p} cannot be read ({e}). Fix: {fix}") from None
        if got != want:
            raise StoreCorruptError(f"{p} does not match its sha256 in {MANIFEST} (damaged or edited). Fix: {fix}")
    return files


def attr_sha256(attr: dict) -> str:
    """sha256 of a JSON attribute without its own ``attr_sha256`` entry (keys sorted, compact)."""
    body = {k: v for k, v in attr.items() if k != ATTR_HASH}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=True).encode("ascii")).hexdigest()


def sealed(attr: dict) -> dict:
    """``attr`` with its :func:`attr_sha256` recorded under ``attr_sha256``."""
    out = {k: v for k, v in attr.items() if k != ATTR_HASH}
    out[ATTR_HASH] = attr_sha256(out)
    return out


def attr_intact(attr: dict) -> bool | None:
    """True when ``attr`` matches its recorded sha256, False when not, None when none is recorded."""
    want = attr.get(ATTR_HASH)
    if want is None:
        return None
    return want == attr_sha256(attr)


# ---- publishing a folder whole, once ---------------------------------------------------------

def _host() -> str:
    return socket.gethostname().replace("-", "_") or "host"


def temp_sibling(final, kind: str = "tmp") -> Path:
    """A unique temporary name beside ``final`` for a folder written whole and renamed into place:
    ``.NAME.tmp-HOST-PID-HEX`` (the host and process let :func:`clean_stale` remove it after
    its writer was killed)."""
    final = Path(final)
    return final.parent / f".{final.name}.{kind}-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def clean_stale(final) -> list:
    """Remove the temporary folders and files beside ``final`` (:func:`temp_sibling`) left by
    writers on this host that no longer run; return their paths."""
    final = Path(final)
    pat = re.compile(rf"\.{re.escape(final.name)}\.(tmp|old)-{re.escape(_host())}-(\d+)-[0-9a-f]{{8}}")
    gone = []
    try:
        entries = list(final.parent.iterdir())
    except OSError:
        return gone
    for p in entries:
        m = pat.fullmatch(p.name)
        if m is None or int(m.group(2)) == os.getpid() or pid_alive(int(m.group(2))):
            continue  # not a temporary name, or its writer still runs
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        gone.append(str(p))
    return gone


def publish_dir(tmp, final, overwrite: bool, what: str, option: str = "--out", fix: str | None = None):
    """Move the finished folder ``tmp`` to ``final`` by a rename.

    Without ``overwrite`` the rename is the check: renaming a folder onto a non-empty one fails,
    so a ``final`` that another run published meanwhile is never replaced (an empty folder is).
    With ``overwrite`` an existing ``final`` is moved aside first and removed once the new one is
    in place.

    ``fix`` replaces the advice of the refusal (default: pass ``--overwrite`` or choose another
    ``option``), for commands without ``--overwrite``.

    Raises
    ------
    StoreError
        ``final`` holds something (written meanwhile) and ``overwrite`` is off; ``tmp`` is left
        for the caller to remove.
    """
    tmp, final = Path(tmp), Path(final)
    if not overwrite:
        try:
            os.rename(tmp, final)
            return
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
        raise StoreError(f"{option} {final} was written by another run while this {what} was made; it is kept and "
                         f"nothing was replaced. Fix: "
                         f"{fix or f'pass --overwrite to replace it, or choose another {option}'}")
    old = None
    if final.exists() or final.is_symlink():
        old = temp_sibling(final, "old")
        os.rename(final, old)
    os.rename(tmp, final)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
