"""Turns for the SQLite ledger's writers across processes: an ``flock`` on a file beside
the store, taken before ``BEGIN IMMEDIATE`` and let go after the commit.

Why: SQLite cannot block a connection until another process's write lock is free; a
waiting writer polls, and each poll sleeps (ours in tens of microseconds, SQLite's own in
milliseconds). With two processes charging, the waiter overslept most hand-overs, and two
processes admitted fewer charges a second than one (issue 18). The kernel wakes an
``flock`` waiter as soon as the holder lets go, so the turn passes while the holder syncs
its log (the fsync runs after the commit, outside both locks).
A writer that finds the turn taken first asks again without blocking for a moment
(``SPIN_S``), since a turn is held for a single transaction; only then does it wait.

Privacy and integrity do not rest on the gate: SQLite's own write lock still serialises
every write transaction, and a writer that takes no turn (an older dpsql, the store
opened by other tools, or a gate that could not open its file) is excluded by it as
before. The gate only makes the waiting short. A gate that cannot be used therefore
says so (``enter`` returns False) and the store waits for SQLite's lock alone.

Preconditions: one caller at a time per process (the store's group-commit leader, under
the store's lock); the file is on a local file system (as the store itself must be).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import threading
import time
import weakref

_log = logging.getLogger(__name__)

SUFFIX = "-lock"


class GateTimeout(Exception):
    """Another process held the turn for the whole time limit."""


# How long a writer that finds the turn taken keeps asking for it, yielding its CPU
# between asks, before it hands the wait to the waiting thread. The turn is held for one
# transaction (about 0.25 ms with two processes charging), and a hand-over through the
# thread costs two wake-ups: the kernel's of the thread, then the thread's of the
# caller. Asking in a loop takes the turn as soon as it is let go. Two single-threaded
# processes charging on disk: about 3,350 -> 4,030 charges/s
# (bench/measurement_notes.md, "Writers' turns: asking before waiting"). The loop yields
# at every ask, so a CPU that has other work does it meanwhile.
SPIN_S = 0.001

# Every open gate of this process, for the fork hook below.
_GATES: weakref.WeakSet[WriterGate] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child closes its copies of its parent's gate files at once.

    ``flock`` belongs to the open file, which fork shares: a child keeping the copy
    would keep a turn its parent holds alive after the parent let go of its own
    descriptor by dying or closing the gate, and every writer of every process would
    then wait for the child to exit. Closing one of several descriptors of a file
    releases nothing, so the parent's turn is unaffected. The child opens a file of its
    own on its first turn."""
    for gate in list(_GATES):
        gate._forget_parents_file()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Request:
    """One wait handed to the waiting thread. ``woken`` is a lock taken at creation and
    released by the waiting thread once the turn is this process's (or the gate closed):
    a raw lock's timed acquire is the cheapest wake-up between two threads."""

    __slots__ = ("abandoned", "granted", "woken")

    def __init__(self) -> None:
        self.woken = threading.Lock()
        self.woken.acquire()
        self.granted = False
        self.abandoned = False


class WriterGate:
    """The turn of this process's writer on one store (see the module docstring)."""

    def __init__(self, store_path: str) -> None:
        self._path = store_path + SUFFIX
        # (pid, descriptor): a child after fork shares the parent's open file, and with
        # it the parent's turn, so it closes that copy and opens its own.
        self._fd: tuple[int, int] | None = None
        self._unusable = False
        self._closed = False
        self._new_waiting_thread()
        _GATES.add(self)

    def _forget_parents_file(self) -> None:
        """In a forked child (see :func:`_after_fork_in_child`): the parent's waiting
        thread and its locks' holders are not here, and its descriptor is not ours."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd[1])
        self._new_waiting_thread()

    def _new_waiting_thread(self) -> None:
        # flock takes no time limit, so a wait that must end blocks on a thread of its
        # own (started on the first wait) while the caller waits for it with one.
        # ``_state`` guards the fields below and ``_closed``; ``_go`` is released to
        # wake the thread (for a request, or to end) and ``_go_open`` says it is.
        self._state = threading.Lock()
        self._go = threading.Lock()
        self._go.acquire()
        self._go_open = False
        self._pending: _Request | None = None
        # True from the thread's taking a request until it has handed the turn on.
        self._busy = False
        self._waiter: threading.Thread | None = None

    def _descriptor(self) -> int | None:
        pid = os.getpid()
        if self._fd is not None and self._fd[0] == pid:
            return self._fd[1]
        if self._fd is not None:
            # Forked without the fork hook (os.fork bypassed): as that hook does, but
            # the copy is left open, since its number may name another file by now.
            self._new_waiting_thread()
            self._fd = None
        if self._unusable or self._closed:
            return None
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            # A folder this user may not write, the name taken by a folder: the store
            # still works, waiting on SQLite's lock alone.
            _log.info("ledger writers wait without a turn file (%s): %s", self._path, exc)
            self._unusable = True
            return None
        self._fd = (pid, fd)
        return fd

    def enter(self, timeout: float) -> bool:
        """Take this process's turn, waiting at most ``timeout`` seconds for another
        process to let go. True: held until :meth:`leave`; False: no gate here (the
        caller relies on SQLite's lock alone). Raises GateTimeout."""
        fd = self._descriptor()
        if fd is None:
            return False
        with self._state:
            busy = self._busy
        if busy:
            # The waiting thread is still in a wait its caller abandoned: the open file
            # may get the turn under it at any moment, so only that thread hands it out.
            self._wait(fd, timeout, timeout)
            return True
        start = time.monotonic()
        try:
            taken = self._ask(fd, min(SPIN_S, timeout) if timeout > 0 else 0.0)
        except OSError as exc:
            _log.info("ledger writers wait without a turn file (%s): %s", self._path, exc)
            self._unusable = True
            return False
        if not taken:
            self._wait(fd, timeout - (time.monotonic() - start), timeout)
        return True

    @staticmethod
    def _ask(fd: int, seconds: float) -> bool:
        """Ask for the turn without blocking, again and again for ``seconds`` (at least
        once), yielding the CPU between asks (see ``SPIN_S``). True: the turn is held.

        Only while the waiting thread is idle (``enter`` checks): nobody else in this
        process can then hold the turn of this open file, so an exception that ends the
        loop (a signal handler's), whenever it comes, lets the turn go unasked: letting
        go of a turn not held changes nothing, and one taken just before the exception
        must not stay with a caller that will never leave it. The handler calls nothing
        in Python before the unlock, so a second pending signal cannot skip it."""
        try:
            deadline = time.monotonic() + seconds
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    pass
                if not time.monotonic() < deadline:
                    return False
                os.sched_yield()
        except BaseException:
            # No call into Python code before the unlock: a second pending handler runs
            # at the first frame's start (contextlib.suppress's) and would skip it.
            try:  # noqa: SIM105 (see above)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                pass
            raise

    def _wait(self, fd: int, timeout: float, limit: float) -> None:
        # ``limit`` is the caller's whole time limit, for the message: ``timeout`` is
        # what is left of it after asking.
        # A time limit a raw lock accepts: never negative (nor NaN), never beyond the
        # platform's limit (an unbounded limit is out of range there, not forever).
        timeout = min(timeout, threading.TIMEOUT_MAX) if timeout > 0 else 0.0
        if not math.isfinite(timeout):
            timeout = threading.TIMEOUT_MAX
        request = _Request()
        try:
            # Registered inside the try: an exception after ``_pending`` is set (at the
            # start of ``_wake``, say) must give the request up, not leave it pending.
            with self._state:
                # A request still pending here was abandoned by its caller: replaced.
                self._pending = request
                if self._waiter is None:
                    self._waiter = threading.Thread(
                        target=self._wait_for_turns,
                        args=(fd,),
                        name="dpsql-ledger-turn",
                        daemon=True,
                    )
                    self._waiter.start()
                self._wake()
            woken = request.woken.acquire(timeout=timeout)
        except BaseException:
            # Interrupted (KeyboardInterrupt, a signal handler's exception): nobody will
            # leave a turn granted to this request, so it is given up like a timed-out
            # one, and a turn already granted goes back at once.
            with self._state:
                request.abandoned = True
                if self._pending is request:
                    self._pending = None
                if request.granted:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            raise
        if woken and request.granted:
            return
        with self._state:
            if request.granted:
                return
            request.abandoned = True
            if self._pending is request:
                # Not taken yet: the thread must not take it after this caller has
                # found the turn free, then let that turn go (one open file, one lock).
                self._pending = None
            # Otherwise the thread lets the turn go again as soon as it gets it.
        if woken:
            raise GateTimeout("the wait for the ledger's write turn ended without it")
        raise GateTimeout(f"another process held the ledger's write turn for {limit:g} s")

    def _wake(self) -> None:
        """Wake the waiting thread (under ``_state``); once is enough for any number of
        calls before it wakes."""
        if not self._go_open:
            self._go_open = True
            self._go.release()

    def _wait_for_turns(self, fd: int) -> None:
        while True:
            self._go.acquire()
            with self._state:
                self._go_open = False
                request, self._pending = self._pending, None
                if self._closed:
                    self._waiter = None
                    if request is not None:
                        request.woken.release()
                    return
                if request is None:
                    continue  # woken for a request abandoned before it was taken
                self._busy = True
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as exc:
                _log.debug("ledger turn wait ended: %s", exc)
                with self._state:
                    self._busy = False
                    self._waiter = None
                request.woken.release()
                return
            with self._state:
                self._busy = False
                if self._closed:
                    # close() closed the descriptor (under this lock), so its number may
                    # name another file now; the turn went with the file.
                    self._waiter = None
                    request.woken.release()
                    return
                while request.abandoned:
                    # Its caller gave up; a newer caller may be waiting (for this same
                    # thread, woken for it): the turn is theirs, else it goes back.
                    newer, self._pending = self._pending, None
                    if newer is None:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                        break
                    if self._go_open:  # released for ``newer``, which is served here
                        self._go.acquire()
                        self._go_open = False
                    request = newer
                else:
                    request.granted = True
            if request.granted:
                request.woken.release()

    def leave(self) -> None:
        """Let the turn go (after the commit or the rollback of a transaction whose
        :meth:`enter` returned True; letting go of a turn not held changes nothing)."""
        fd = self._fd
        if fd is not None and fd[0] == os.getpid():
            fcntl.flock(fd[1], fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file (the turn goes with it). The waiting thread ends now, or, if
        it is blocked in a wait its caller abandoned, when that wait does."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            fd, self._fd = self._fd, None
            if fd is not None and fd[0] == os.getpid():
                os.close(fd[1])
            if self._waiter is not None:
                self._wake()
