"""A stop signal is never lost: when Python raises a signal's exception inside a weakref callback
(where it cannot propagate and used to be printed as "Exception ignored in ..." while the run went
on to its end), the executors raise it again between two results, and nothing is printed."""
import signal
import sys
import weakref

import pytest

from gramtile.pipeline.compute.errors import Terminated
from gramtile.pipeline.compute.executors import SequentialExecutor, ThreadExecutor
from gramtile.pipeline.compute.interrupts import Interrupts, check


class _Thing:
    pass


def _swallowed(exc):
    """An object whose weakref callback raises ``exc`` when the object goes: what Python's handler
    does when the signal arrives while such a callback runs."""
    def callback(_):
        raise exc
    thing = _Thing()
    return thing, weakref.ref(thing, callback)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("executor", [SequentialExecutor(), ThreadExecutor(2)], ids=["sequential", "threads"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt, Terminated])
def test_an_interrupt_swallowed_in_a_weakref_callback_stops_the_run_silently(executor, exc, unraisable):
    seen = []
    with Interrupts():
        with pytest.raises(KeyboardInterrupt) as got:
            seen, _ = _run_into(executor, seen, exc)
    assert type(got.value) is exc
    assert len(seen) < 50, "the run went on after the interrupt"
    assert unraisable == []  # not printed as "Exception ignored in ..."


def _run_into(executor, seen, exc):
    holder = {}
    holder["thing"], ref = _swallowed(exc)
    for tag, res in executor.imap(lambda i: i, ((i, (i,)) for i in range(1000))):
        seen.append(res)
        if tag == 3:
            del holder["thing"]
    return seen, ref


@pytest.fixture
def unraisable(monkeypatch):
    """What reaches the unraisable hook Python would use (pytest's own turns it into a warning)."""
    got = []
    monkeypatch.setattr(sys, "unraisablehook", got.append)
    return got


@pytest.mark.timeout(60)
def test_without_the_handler_the_interrupt_is_lost(unraisable):
    """The failure the handler prevents, shown with Python's own handling: the run goes on."""
    seen = []
    seen, _ = _run_into(SequentialExecutor(), seen, KeyboardInterrupt)
    assert len(seen) == 1000
    assert [type(u.exc_value) for u in unraisable] == [KeyboardInterrupt]


def test_other_unraisable_errors_still_reach_the_previous_hook(unraisable):
    with Interrupts():
        thing, ref = _swallowed(ValueError("a bug in a callback"))
        del thing
        check()  # nothing lost: nothing raised
    assert [str(u.exc_value) for u in unraisable] == ["a bug in a callback"]


def test_handlers_are_restored_on_exit():
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook)
    with Interrupts() as h:
        assert signal.getsignal(signal.SIGINT) is h and signal.getsignal(signal.SIGTERM) is h
        assert sys.unraisablehook != before[2]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook) == before


def test_a_signal_raises_its_exception():
    with Interrupts() as h:
        with pytest.raises(KeyboardInterrupt) as got:
            h(signal.SIGINT, None)
        assert type(got.value) is KeyboardInterrupt
        with pytest.raises(Terminated):
            h(signal.SIGTERM, None)
        check()  # raised where it could propagate: nothing to raise again
