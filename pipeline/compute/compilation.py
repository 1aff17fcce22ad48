"""Numba's first compile of the kernel cores: where the cache lives, and a one-line notice.

Every core is ``@njit(cache=True)``: the first call in a fresh install compiles it (seconds per
kernel family) and writes it to Numba's cache, which later processes load in milliseconds.
``gramtile/__init__.py`` points ``NUMBA_CACHE_DIR`` at the user cache folder
(``platformdirs.user_cache_dir("gramtile")/numba``) before Numba is imported, unless it is set
already, so a read-only install (site-packages not writable) caches too. The first time a kernel
family is used with a cache, :func:`announce` prints one line saying so and about how long it
takes (:data:`COMPILE_SECONDS`, measured by ``bench/compile_times.py``, BENCHMARKS.md); after a
run, :func:`mark_compiled` leaves a marker per family (keyed to its source file and the Numba
version, which is what Numba's cache is keyed to) so the notice is not repeated.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numba

from gramtile.pipeline.cache import current

#: Seconds a cold first call of each kernel module takes (compile + first evaluation, on 8 small
#: examples; bench/compile_times.py, BENCHMARKS.md, 2-CPU machine), rounded up. The
#: tree kernels compile one core per path (ST and SST share one, PT has its own): 5-11 s measured
#: under load 9-12, the larger (PT) figure rounded up here.
COMPILE_SECONDS = {
    "tree_kernels": 12, "route": 2, "dependency_path": 8, "relation_subtree": 6, "subsequence": 5,
    "hdag": 17, "bag_kernels": 1, "wsd_kernels": 5,
}
DEFAULT_SECONDS = 10

def cache_dir() -> Path | None:
    """Numba's cache folder (``$NUMBA_CACHE_DIR``), or None when Numba caches beside the sources."""
    d = os.environ.get("NUMBA_CACHE_DIR") or numba.config.CACHE_DIR
    return Path(d) if d else None


def kernel_modules(spec) -> dict:
    """``{module stem: source file}`` of the kernel modules ``spec``'s base kernels run."""
    out = {}
    for b in spec.base_specs():
        # a kernel over two fields runs its base kernel's cores (within_pair's ``kernel``)
        core = b.kernel if hasattr(b, "kernel") and hasattr(b.kernel, "block") else b
        f = getattr(sys.modules.get(type(core).__module__), "__file__", None)
        if f:
            out[Path(f).stem] = Path(f)
    return out


def _marker(root: Path, stem: str, source: Path) -> Path:
    try:
        stamp = f"{source.resolve()}:{source.stat().st_mtime_ns}:{numba.__version__}"
    except OSError:
        stamp = f"{source}:{numba.__version__}"
    return root / "gramtile-compiled" / f"{stem}-{hashlib.sha1(stamp.encode()).hexdigest()[:16]}"


def pending(spec) -> dict:
    """The kernel modules of ``spec`` not yet compiled into the cache (as far as the markers tell)."""
    root = cache_dir()
    if root is None:
        return {}
    return {stem: src for stem, src in kernel_modules(spec).items() if not _marker(root, stem, src).exists()}


def announce(spec, file=None) -> str | None:
    """Print (once per run and family: the run's cache remembers it) that the cores of ``spec``
    compile now; return the line."""
    said = current()
    todo = {s: p for s, p in pending(spec).items() if said.get("announced", s) is None}
    if not todo:
        return None
    for s in todo:
        said.put("announced", s, True)
    secs = sum(COMPILE_SECONDS.get(s, DEFAULT_SECONDS) for s in todo)
    line = (f"gramtile: compiling kernel cores ({', '.join(sorted(todo))}), once, about {secs} s "
            f"(cached in {cache_dir()})")
    print(line, file=file or sys.stderr, flush=True)
    return line


def mark_compiled(spec):
    """Record that the cores of ``spec`` are in the cache (after a successful evaluation)."""
    root = cache_dir()
    if root is None:
        return
    for stem, src in kernel_modules(spec).items():
        m = _marker(root, stem, src)
        try:
            m.parent.mkdir(parents=True, exist_ok=True)
            m.touch()
        except OSError:
            return  # an unwritable cache: Numba cannot cache there either; the notice repeats
