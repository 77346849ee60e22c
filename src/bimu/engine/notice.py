"""A one-line notice while the engine's kernels compile.

numba compiles a kernel the first time it meets a new network shape, precision or K (then keeps it in
its disk cache): 10 to 60 seconds of silence on a fresh installation. :func:`compile_notice` wraps a
call that may compile: when the call is still running after :data:`NOTICE_AFTER` seconds, one line on
standard error says what is happening; a call that ends sooner prints nothing. Each kind of call is
announced at most once per process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

NOTICE_AFTER = 3.0
"""Seconds a possibly compiling call may run before the notice is printed."""
POLL = 0.1
"""Longest pause, in seconds, between two looks of the watcher at the running calls."""

_announced: set[str] = set()
_lock = threading.Lock()
_running: dict[int, tuple[str, str, float]] = {}  # thread -> (kind, what, monotonic start)
_watcher: threading.Thread | None = None


def _say(kind: str, text: str) -> None:
    with _lock:
        if kind in _announced:
            return
        _announced.add(kind)
    print(f"bimu: {text}", file=sys.stderr, flush=True)


def _watch() -> None:
    while True:
        time.sleep(min(POLL, NOTICE_AFTER / 4))
        now = time.monotonic()
        for kind, what, started in list(_running.values()):
            if now - started >= NOTICE_AFTER:
                _say(kind, f"compiling {what} for this network (once per installation, network shape and "
                           "precision; up to a minute; `bimu warmup` does it ahead)...")


def _start_watcher() -> None:
    global _watcher
    with _lock:
        if _watcher is None:
            _watcher = threading.Thread(target=_watch, name="bimu-compile-notice", daemon=True)
            _watcher.start()


def _forget_watcher() -> None:  # a forked child has the calling thread alone
    global _watcher
    _watcher = None
    _running.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_watcher)


@contextlib.contextmanager
def compile_notice(kind: str, what: str):
    """Run the body; if it takes longer than :data:`NOTICE_AFTER` seconds, print once (per ``kind`` and
    process) that ``what`` is compiling, which happens once per installation and network shape. A call
    costs a dictionary entry (one watcher thread per process looks at the running calls), so it can wrap
    every online step.

    >>> with compile_notice("doctest", "a kernel"):
    ...     pass
    """
    if kind in _announced:
        yield
        return
    if _watcher is None:
        _start_watcher()
    me = threading.get_ident()
    outer = _running.get(me)
    _running[me] = (kind, what, time.monotonic())
    try:
        yield
    finally:
        if outer is None:
            _running.pop(me, None)
        else:
            _running[me] = outer
