"""A one-line notice while the engine's kernels compile.

numba compiles a kernel the first time it meets a new network shape, precision or K (then keeps it in
its disk cache): 10 to 60 seconds of silence on a fresh installation. :func:`compile_notice` wraps a
call that may compile: when the call is still running after :data:`NOTICE_AFTER` seconds, one line on
standard error says what is happening; a call that ends sooner prints nothing. Each kind of call is
announced at most once per process.
"""

from __future__ import annotations

import contextlib
import sys
import threading

NOTICE_AFTER = 3.0
"""Seconds a possibly compiling call may run before the notice is printed."""

_announced: set[str] = set()
_lock = threading.Lock()


def _say(kind: str, text: str) -> None:
    with _lock:
        if kind in _announced:
            return
        _announced.add(kind)
    print(f"bimu: {text}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def compile_notice(kind: str, what: str):
    """Run the body; if it takes longer than :data:`NOTICE_AFTER` seconds, print once (per ``kind`` and
    process) that ``what`` is compiling, which happens once per installation and network shape.

    >>> with compile_notice("doctest", "a kernel"):
    ...     pass
    """
    if kind in _announced:
        yield
        return
    timer = threading.Timer(NOTICE_AFTER, _say, (kind, f"compiling {what} for this network (once per "
                                                      "installation, network shape and precision; up to a "
                                                      "minute; `bimu warmup` does it ahead)..."))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
