"""Stop signals that are never lost: Ctrl-C (SIGINT) and SIGTERM.

Python raises the exception of a signal in the main thread at whatever it is running. When that is
a weakref callback, a ``__del__`` or a garbage-collector callback (the Dask client runs many), the
exception cannot propagate: Python prints "Exception ignored in ..." and carries on, and a run told
to stop would go on to its end. :class:`Interrupts` handles both signals while a command runs: its
handler raises ``KeyboardInterrupt`` (:class:`~gramtile.pipeline.compute.errors.Terminated` for
SIGTERM) as before; an interrupt swallowed that way is recorded silently instead of printed
(``sys.unraisablehook``), and :func:`check`, which every executor calls between two results, raises
it again where it can propagate.
"""
from __future__ import annotations

import signal
import sys
import threading

from gramtile.pipeline.compute.errors import Terminated

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _exception(signum: int) -> KeyboardInterrupt:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


class Interrupts:
    """The handler of SIGINT and SIGTERM while a command runs (a context manager: installed on
    entry, the previous handlers and unraisable hook restored on exit). Off the main thread, where
    no handler can be set, it does nothing."""

    def __init__(self):
        self.lost: int | None = None  # a signal whose exception was swallowed, not yet raised again
        self._previous: dict = {}
        self._hook = None

    def __call__(self, signum, frame):
        raise _exception(signum)

    def _unraisable(self, unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.lost = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT
            return
        self._hook(unraisable)

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self) for s in _SIGNALS}
            self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)
        if self._hook is not None:
            sys.unraisablehook = self._hook
        self._previous, self._hook = {}, None

    def raise_lost(self) -> None:
        if self.lost is not None:
            signum, self.lost = self.lost, None
            raise _exception(signum)


def check() -> None:
    """Raise again a stop signal whose exception was swallowed where it arrived (see the module's
    description); nothing when none was, or when no :class:`Interrupts` handles the signals."""
    handler = signal.getsignal(signal.SIGINT)
    if isinstance(handler, Interrupts):
        handler.raise_lost()
