"""A row-major scratch copy of a kernel, for solvers that read kernel rows on demand (smo).

A Gram store keeps K in compressed 1000 x 1000 chunks, so reading one kernel row decompresses
every chunk the row crosses (40 chunks, 320 MB of decompression, for one row of 40,000
examples). A solver whose cache holds only part of K(train, train) re-reads evicted rows all
the time, so it reads them from here instead: K over all examples of an evaluation as raw
float64, row after row, on local disk, read one row at a time with ``os.pread`` (not mmap, so
the process's memory stays bounded by the solver's own cache).

The file is written once per evaluation (:func:`write_row_file`) by streaming row bands of the
kernel source: for a Gram store source each stored chunk is read and checked once (its mirror
below the diagonal is written from the same read), normalised with the source's own arithmetic,
so every value equals ``source.block([r], [c])`` bitwise. Every fold and every C of the
evaluation, and every parallel task, reads the same file: a fold's row is the gather of its
training columns from the file row (:meth:`RowFile.read_into`). A task carries the file's path,
its random token and the identity of the source it was written from (store paths, uids, row
selections, normalisation, composite spec); a reader refuses a file whose header does not carry
them (a stale or foreign file is never reused). The file is written under a temporary name and
renamed when complete, the free disk space is checked first, and :func:`row_file` removes it
when the evaluation ends, also on error. A writer killed outright (SIGKILL, a lost machine)
cannot clean up: its file is named after its host and process id, and the next writer on that
host removes the files of processes that no longer run (:func:`remove_stale`).

Layout: a header of :data:`HEADER` bytes (``MAGIC``, then JSON: n, token, identity, dtype),
then n rows of n float64 (native byte order); row r starts at byte ``HEADER + 8 n r``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.sources import ArrayKernelSource, StoreKernelSource, ViewKernelSource, normalize_inplace
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_view import GramView
from gramtile.pipeline.stores.locks import pid_alive
from gramtile.pipeline.stores.storage import absolute

MAGIC = b"GRAMTILE-ROWFILE 1\n"
#: Bytes before the first row (the header, zero-padded).
HEADER = 4096
#: Free space kept on the scratch file system beyond the file itself, in bytes.
DISK_MARGIN = 1 << 30
#: Largest band of rows (in bytes) held while writing from a source that is not a plain store.
BAND_BYTES = 512 * 10**6


def _idx_hash(idx) -> str | None:
    return None if idx is None else hashlib.sha256(np.ascontiguousarray(idx, dtype=np.int64).tobytes()).hexdigest()


def _store_id(st) -> list:
    # the absolute path: the driver (which may name the store relatively) and a worker started in
    # another directory (which opens it by the absolute path its task carries) agree
    return [absolute(st.path), str(st.meta.get("uid")), str(st.meta.get("rows_sha256"))]


def identity(source):
    """What a kernel source reads, as a JSON-able list: store paths, uids and row selections, the
    normalisation, the composite spec, a renumbering of examples. None for a source that is not
    backed by a Gram store (an in-memory matrix: it needs no row file)."""
    if isinstance(source, StoreKernelSource):
        return ["store", *_store_id(source.store), bool(source.normalized)]
    if isinstance(source, GramView):
        return ["view", *_store_id(source.store)]
    if isinstance(source, ComposedView):
        return ["composed", source.spec.to_json(), sorted(_store_id(v.store) for v in source.views.values())]
    if isinstance(source, ViewKernelSource):
        inner = identity(source.view)
        return None if inner is None else ["renumbered", inner, _idx_hash(source.idx), int(source.n)]
    return None


def store_backed(source) -> bool:
    """Whether ``source`` reads a Gram store (so rows read from it decompress store chunks)."""
    return identity(source) is not None


class RowFile:
    """A written row file: path, size, token and the identity of its source (picklable; each
    process opens its own file descriptor on first read)."""

    def __init__(self, path, n: int, token: str, ident):
        self.path = str(path)
        self.n = int(n)
        self.token = str(token)
        self.identity = ident
        self._fd = None
        self.preads = 0

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_fd"] = None
        return d

    @property
    def nbytes(self) -> int:
        return HEADER + 8 * self.n * self.n

    def positions(self, source):
        """Positions in this file of the examples of ``source`` (an int array of length
        ``source.n``), or None if this file was not written from ``source`` or a renumbering of it."""
        ident = identity(source)
        if ident is None:
            return None
        if ident == self.identity:
            return np.arange(self.n, dtype=np.int64)
        if isinstance(source, ViewKernelSource):
            inner = self.positions(source.view)
            if inner is not None:
                return inner[source.idx] if source.idx is not None else inner[:source.n]
        return None

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise EvaluationError(
                f"kernel row file {self.path} does not exist here: it was removed, or this worker does not see "
                "the driver's scratch directory. Fix: pass --scratch DIR on a file system every worker shares "
                "(or run the fits in the driver's machine)") from None
        try:
            head = os.pread(fd, HEADER, 0)
            meta = None
            if head.startswith(MAGIC):
                with contextlib.suppress(ValueError):
                    meta = json.loads(head[len(MAGIC):].rstrip(b"\0").decode())
            size = os.fstat(fd).st_size
            if (not isinstance(meta, dict) or meta.get("token") != self.token or meta.get("n") != self.n
                    or meta.get("identity") != self.identity or size != self.nbytes):
                raise EvaluationError(
                    f"kernel row file {self.path} is not the one this evaluation wrote (stale, foreign or truncated: "
                    f"{size} bytes, expected {self.nbytes}); it is never reused. Fix: rerun the evaluation (it "
                    "writes a fresh file)")
        except BaseException:
            os.close(fd)
            raise
        if self._fd is not None:  # another thread of this process opened it meanwhile
            os.close(fd)
            return self._fd
        self._fd = fd
        return fd

    def read_into(self, pos: int, cols, out, buf) -> None:
        """``out[:] = K[pos, cols]``: one pread of file row ``pos`` into ``buf`` (float64, length n),
        then the gather of ``cols`` (None: the whole row, read straight into ``out``)."""
        fd = self._open()
        target = out if cols is None else buf
        got = os.preadv(fd, [memoryview(target).cast("B")], HEADER + 8 * self.n * int(pos))
        self.preads += 1
        if got != 8 * self.n:
            raise EvaluationError(f"kernel row file {self.path} ended inside row {pos} (read {got} bytes); it was "
                                  "truncated. Fix: rerun the evaluation")
        if cols is not None:
            np.take(buf, cols, out=out)

    def diag(self, positions) -> np.ndarray:
        """K[p, p] for the given file positions (one 8-byte pread each)."""
        fd = self._open()
        out = np.empty(len(positions))
        for k, p in enumerate(np.asarray(positions, dtype=np.int64).tolist()):
            out[k] = np.frombuffer(os.pread(fd, 8, HEADER + 8 * (self.n * p + p)), dtype=np.float64)[0]
        return out

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def remove(self) -> None:
        """Close and delete the file (no error if it is gone already)."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _name_re(host: str):
    return re.compile(rf"gramtile-rows-{re.escape(host)}-(\d+)-[0-9a-f]{{12}}\.f64(\.partial)?")


def remove_stale(directory) -> list:
    """Remove the row files in ``directory`` left by writers of this host that no longer run
    (killed before they could remove them); return their paths."""
    gone, pat = [], _name_re(socket.gethostname())
    for p in Path(directory).iterdir():
        m = pat.fullmatch(p.name)
        if m is None or int(m.group(1)) == os.getpid() or pid_alive(int(m.group(1))):
            continue  # not a row file, or its writer still runs
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            gone.append(str(p))
            log.info(f"  removed the stale kernel row file {p} (its process {m.group(1)} no longer runs)")
    return gone


def _pwrite_all(fd, data, offset: int) -> None:
    mv = memoryview(np.ascontiguousarray(data)).cast("B")
    while mv:
        k = os.pwrite(fd, mv, offset)
        mv, offset = mv[k:], offset + k


def _write_store(source: StoreKernelSource, fd, n: int) -> None:
    """Each upper-triangle chunk once: its rows into its tile row's band, its transpose into the
    rows below; normalised as :meth:`StoreKernelSource.block` does (same arithmetic, same bits)."""
    view, t = source.view, source.store.tile
    dr, dc = view.diag()
    dr, dc = np.asarray(dr, dtype=np.float64), np.asarray(dc, dtype=np.float64)
    nt = -(-n // t)
    for a in range(nt):
        r0, r1 = a * t, min(n, (a + 1) * t)
        band = np.empty((r1 - r0, n - r0))
        for b in range(a, nt):
            c0, c1 = b * t, min(n, (b + 1) * t)
            raw = np.asarray(view.tile_block(a, b), dtype=np.float64)
            blk = np.array(raw, dtype=np.float64, copy=True)
            if source.normalized:
                normalize_inplace(blk, dr[r0:r1], dc[c0:c1])
            band[:, c0 - r0:c1 - r0] = blk
            if b > a:
                tr = np.ascontiguousarray(raw.T)
                if source.normalized:
                    normalize_inplace(tr, dr[c0:c1], dc[r0:r1])
                for k in range(c1 - c0):
                    _pwrite_all(fd, tr[k], HEADER + 8 * ((c0 + k) * n + r0))
        for k in range(r1 - r0):
            _pwrite_all(fd, band[k], HEADER + 8 * ((r0 + k) * n + r0))


def _write_bands(source, fd, n: int, band: int) -> None:
    cols = np.arange(n, dtype=np.int64)
    for lo in range(0, n, band):
        hi = min(n, lo + band)
        blk = np.ascontiguousarray(source.block(cols[lo:hi], cols), dtype=np.float64)
        if blk.shape != (hi - lo, n):
            raise EvaluationError(f"kernel source returned a block of shape {blk.shape}, expected {(hi - lo, n)}")
        _pwrite_all(fd, blk, HEADER + 8 * lo * n)


def tile_of(source) -> int:
    """The tile (chunk) size of the store a source reads (1000 for a source without one)."""
    if isinstance(source, (StoreKernelSource, GramView)):
        return int(source.store.tile)
    if isinstance(source, ComposedView):
        return int(next(iter(source.views.values())).store.tile)
    if isinstance(source, ViewKernelSource):
        return tile_of(source.view)
    return 1000


def write_row_file(source, directory=None) -> RowFile:
    """Write K over all examples of ``source`` (a store-backed kernel source) as a row file in
    ``directory`` (default: the system's temporary directory) and return it.

    Raises
    ------
    EvaluationError
        The source is in memory (it needs no row file), or the directory lacks the space (the
        message names ``--scratch``).
    """
    ident = identity(source)
    if ident is None or isinstance(source, ArrayKernelSource):
        raise EvaluationError("a row file is for kernel sources read from Gram stores; an in-memory matrix is read "
                              "directly")
    n = int(source.n)
    d = Path(directory) if directory is not None else Path(tempfile.gettempdir())
    if not d.is_dir():
        raise EvaluationError(f"scratch directory {d} does not exist. Fix: create it, or pass --scratch DIR naming an "
                              "existing directory on local disk")
    remove_stale(d)
    token = uuid.uuid4().hex
    rf = RowFile(d / f"gramtile-rows-{socket.gethostname()}-{os.getpid()}-{token[:12]}.f64", n, token, ident)
    free = shutil.disk_usage(d).free
    if free < rf.nbytes + DISK_MARGIN:
        raise EvaluationError(
            f"the kernel row file of {n:,} examples needs {rf.nbytes / 1e9:,.1f} GB (+{DISK_MARGIN / 1e9:.1f} GB "
            f"margin) in {d}, which has {free / 1e9:,.1f} GB free. Fix: pass --scratch DIR on a local disk with the "
            "space, or raise --cache-mb so the cache holds every training row (no row file is then needed)")
    partial = Path(str(rf.path) + ".partial")
    meta = json.dumps({"n": n, "token": token, "identity": ident, "dtype": "float64<" if np.little_endian
                       else "float64>"}).encode()
    if len(MAGIC) + len(meta) > HEADER:
        raise EvaluationError(f"row file header of {len(meta)} bytes does not fit {HEADER} (identity too long)")
    t0 = time.perf_counter()
    log.info(f"  writing kernel rows of {n:,} examples to {rf.path} ({rf.nbytes / 1e9:,.2f} GB)")
    fd = None
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, rf.nbytes)
        _pwrite_all(fd, np.frombuffer(MAGIC + meta, dtype=np.uint8), 0)
        if isinstance(source, StoreKernelSource):
            _write_store(source, fd, n)
        else:
            _write_bands(source, fd, n, max(1, min(tile_of(source), BAND_BYTES // (8 * n))))
        os.close(fd)
        fd = None
        os.rename(partial, rf.path)
    except BaseException as e:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        if isinstance(e, OSError) and (e.filename is None or Path(e.filename) in (partial, rf.path)):
            # the scratch directory's fault (full, read-only, a file-size limit), not --out's
            raise EvaluationError(
                f"cannot write the kernel row file {partial} in the scratch directory {d} "
                f"({e.strerror or e}). Fix: pass --scratch DIR naming a local directory you can write with "
                f"{rf.nbytes / 1e9:,.2f} GB free, or raise --cache-mb so the cache holds every training row (no "
                "row file is then needed)") from None
        raise
    rf.write_seconds = time.perf_counter() - t0
    log.info(f"  kernel rows written in {rf.write_seconds:.1f} s")
    return rf


@contextlib.contextmanager
def row_file(source, directory=None, needed: bool = True):
    """``with row_file(source, dir) as rf:`` a fresh row file for the block (None when not
    ``needed`` or the source is in memory), removed when the block ends, also on error."""
    if not needed or not store_backed(source):
        yield None
        return
    rf = write_row_file(source, directory)
    try:
        yield rf
    finally:
        rf.remove()
