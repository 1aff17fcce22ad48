"""Progress and messages: the ``gramtile`` logger and a progress bar that suits its terminal.

Every message a command prints besides its result goes through :data:`log` (the logger
``gramtile``), so ``gramtile --quiet`` / ``--verbose`` (and any logging configuration of a
program using the library) decide what is shown. Without a configured handler (library use)
only warnings reach stderr, through Python's last-resort handler.

:func:`progress_bar` is tqdm's bar when stderr is a terminal; otherwise (a log file, a batch
job's output, a pipe) a :class:`LineProgress` that logs one plain line every ``every``
seconds, instead of the hundreds of carriage-return updates tqdm would write.
"""
from __future__ import annotations

import logging
import sys
import time

from tqdm import tqdm

log = logging.getLogger("gramtile")

#: Seconds between two lines of a :class:`LineProgress`.
LINE_EVERY = 5.0


class LineProgress:
    """tqdm's ``update`` / ``set_postfix_str`` / ``close`` as a plain line every ``every`` seconds
    (and one at the end), logged at INFO level."""

    def __init__(self, total: int, unit: str, desc: str, initial: int = 0, every: float = LINE_EVERY):
        self.total, self.unit, self.desc, self.n = total, unit, desc, int(initial)
        self.every, self.postfix = float(every), ""
        self.t0 = self._last = time.monotonic()
        self.lines = 0

    def set_postfix_str(self, s: str, refresh: bool = True):
        self.postfix = s

    def update(self, n: int = 1):
        self.n += n
        if time.monotonic() - self._last >= self.every:
            self._line()

    def _line(self):
        el = time.monotonic() - self.t0
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        of = "" if self.total is None else f"/{self.total}"
        log.info(f"{self.desc}: {self.n}{of} {self.unit}s{pct}, {el:.0f} s"
                 + (f", {self.postfix}" if self.postfix else ""))
        self._last = time.monotonic()
        self._n_last = self.n
        self.lines += 1

    def close(self):
        """A last line with the final count (unless the last line already showed it)."""
        if self.n != getattr(self, "_n_last", None):
            self._line()


def progress_bar(total: int, unit: str, desc: str, initial: int = 0, disable: bool = False, **tqdm_kwargs):
    """A tqdm bar on a terminal, else a :class:`LineProgress`; a silent (disabled) tqdm bar
    when ``disable``."""
    if disable:
        return tqdm(total=total, disable=True)
    if getattr(sys.stderr, "isatty", lambda: False)():
        return tqdm(total=total, unit=unit, desc=desc, initial=initial, file=sys.stderr, **tqdm_kwargs)
    return LineProgress(total, unit, desc, initial)


class StderrHandler(logging.Handler):
    """Writes each record as one line to the *current* ``sys.stderr`` (so redirection and test
    capture after the handler was installed still see it)."""

    def emit(self, record):
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def configure(verbosity: int = 0) -> None:
    """Show the ``gramtile`` logger on stderr: WARNING and up with ``verbosity`` < 0 (``--quiet``),
    INFO with 0, DEBUG with > 0 (``--verbose``). Replaces a handler an earlier call installed."""
    for h in list(log.handlers):
        if isinstance(h, StderrHandler):
            log.removeHandler(h)
    h = StderrHandler()
    h.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(h)
    log.setLevel(logging.WARNING if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO)
    log.propagate = False
