"""The one-writer lock shared by corpus stores and Gram stores.

On a local path a lock is an exclusive ``flock`` on a lock file that also records the writer's
pid, host and start time: the kernel releases it when its holder dies, so a killed run resumes
without manual cleanup and no race can give two holders. :class:`StoreLock` serves local
paths; :class:`UrlLock` the same rule for stores at fsspec URLs (:mod:`gramtile.pipeline.stores.storage`).
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import socket
import uuid
from pathlib import Path

from gramtile.pipeline.stores.errors import StoreLockedError


def pid_alive(pid) -> bool:
    """True when ``pid`` names a live process on this host (or one we may not signal)."""
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StoreLock:
    """Exclusive writer lock at ``lock_path``; ``what`` names the store in error messages.

    The lock is an exclusive ``flock`` on the lock file, held for as long as the run holds the
    lock; the file also records the holder's pid, host and start time for the messages. The
    kernel drops a ``flock`` when its holder's descriptors close, so a killed (or zombie) holder
    never leaves a lock that needs taking over: the next writer simply gets it, atomically, and
    two writers can never both hold it. After taking the ``flock`` the writer checks that the
    path still names the file it locked (a releasing holder unlinks it first), else it retries.
    On a filesystem without ``flock`` the lock falls back to ``O_CREAT | O_EXCL`` with the
    stale-pid rule (a dead pid of this host is taken over).

    Use as a context manager or with :meth:`acquire` / :meth:`release`.
    """

    def __init__(self, lock_path, what: str):
        self.path = Path(lock_path)
        self.what = what
        self.held = False
        self.me = None
        self.fd = None

    def _identity(self) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname(),
                "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}

    def _locked_error(self, text: str) -> StoreLockedError:
        try:
            other = json.loads(text) if text.strip() else None
        except ValueError:
            other = None
        if not isinstance(other, dict):
            return StoreLockedError(
                f"{self.what} is locked by a live process that has not written its identity into {self.path} "
                f"(content {text[:60]!r}). Fix: wait for that run to finish; the lock is released when its "
                f"process ends")
        return StoreLockedError(
            f"{self.what} is locked by process {other.get('pid')} on {other.get('host')} since "
            f"{other.get('since', other.get('time'))}. Fix: wait for that run to finish, or stop that process; "
            f"its lock is released when it ends")

    def acquire(self):
        me = self._identity()
        for _ in range(100):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            except OSError as e:
                raise StoreLockedError(f"cannot open the lock file {self.path} of {self.what}: {e.strerror}. "
                                       f"Fix: make the store's folder writable") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                raise self._locked_error(text) from None
            except OSError:  # no flock on this filesystem
                os.close(fd)
                return self._acquire_exclusive(me)
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the holder we waited on released (unlinked) it: lock the new file
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
            self.fd, self.held, self.me = fd, True, me
            return self
        raise StoreLockedError(f"could not take the lock {self.path}: it was replaced 100 times in a row")

    def _acquire_exclusive(self, me):
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    text = self.path.read_text()
                    other = json.loads(text or "{}")
                except (OSError, ValueError):
                    text, other = "", None
                if not isinstance(other, dict):
                    raise StoreLockedError(
                        f"lock file {self.path} of {self.what} holds no writer identity ({text[:60]!r}). Fix: "
                        f"if no run writes this store, delete {self.path}") from None
                if other.get("host") == me["host"] and not pid_alive(other.get("pid")):
                    self.path.unlink(missing_ok=True)  # stale: its holder died
                    continue
                raise StoreLockedError(
                    f"{self.what} is locked by process {other.get('pid')} on {other.get('host')} since "
                    f"{other.get('since', other.get('time'))}. Fix: wait for that run to finish, or delete "
                    f"{self.path} if that process no longer exists") from None
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held, self.me = True, me
            return self
        raise StoreLockedError(f"could not take the lock {self.path}; delete it if no run is active")

    def release(self):
        if not self.held:
            return
        self.held = False
        if self.fd is not None:
            # unlink while still holding the flock, then close: a writer that opened the old file
            # meanwhile finds it unlinked after locking it and retries on a fresh file
            try:
                if os.fstat(self.fd).st_ino == os.stat(self.path).st_ino:
                    self.path.unlink()
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None
            return
        try:
            # never remove a lock another process took over
            if json.loads(self.path.read_text()).get("pid") == self.me["pid"]:
                self.path.unlink()
        except (OSError, ValueError):
            pass

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


class UrlLock:
    """Exclusive writer lock object ``name`` in a store at an fsspec URL.

    Holds JSON with the writer's pid, host, start time and a random token. Where the filesystem
    creates files exclusively (fsspec's local and memory filesystems) taking it is atomic, as
    with :class:`StoreLock`. Elsewhere (object stores without conditional writes) it is written
    only if absent and then read back: two writers racing within that window can both see
    "absent", but only the one whose token reads back holds the lock, so at worst both refuse
    (best effort: a store without conditional writes cannot do better). A lock from this host
    whose pid is dead is stale and taken over; a lock from another host is never taken over.

    Parameters
    ----------
    loc : FsspecLocation
        The store's location (:mod:`gramtile.pipeline.stores.storage`).
    name : str
        Object name inside the store, e.g. ``gramtile.lock``.
    what : str
        Names the store in error messages.
    """

    def __init__(self, loc, name: str, what: str):
        self.loc, self.name, self.what = loc, name, what
        self.path = f"{loc.url.rstrip('/')}/{name}"
        self.held = False
        self.me = None

    def _read(self) -> dict:
        try:
            return json.loads(self.loc.read_bytes(self.name) or b"{}")
        except (OSError, ValueError):
            return {}

    def _locked(self, other: dict) -> StoreLockedError:
        return StoreLockedError(
            f"{self.what} is locked by process {other.get('pid')} on {other.get('host')} since "
            f"{other.get('since', other.get('time'))}. Fix: wait for that run to finish, or delete "
            f"{self.path} if that process no longer exists (e.g. python -c \"import fsspec; "
            f"fsspec.open('{self.path}').fs.rm_file('{self.path}')\")")

    def acquire(self):

        me = {"pid": os.getpid(), "host": socket.gethostname(), "token": uuid.uuid4().hex,
              "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        for _ in range(3):
            if self.loc.create_exclusive(self.name, json.dumps(me).encode()):
                if not self.loc.exclusive and self._read().get("token") != me["token"]:
                    raise self._locked(self._read())  # lost a race: another writer's object won
                self.held, self.me = True, me
                return self
            other = self._read()
            if other.get("host") == me["host"] and not pid_alive(other.get("pid")):
                self.loc.remove(self.name)  # stale: its holder died
                continue
            raise self._locked(other)
        raise StoreLockedError(f"could not take the lock {self.path}; delete it if no run is active")

    def release(self):
        if not self.held:
            return
        self.held = False
        # never remove a lock another process took over
        if self._read().get("token") == self.me["token"]:
            self.loc.remove(self.name)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
