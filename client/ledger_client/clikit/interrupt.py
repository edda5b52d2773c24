"""Ctrl-C at any moment: a CLI interrupted while its modules load, while a command runs or while
it exits ends with status 130 and prints no traceback.

The entry points (``ledger``, ``ledger-verify``, ``python -m ledger``) import this module first
(standard library only), call ``guard()`` and only then import the command tree inside
``run_cli``: until the command starts, Ctrl-C ends the process at once (nothing needs cleaning
up); while it runs, Ctrl-C is the usual ``KeyboardInterrupt`` (a command may catch it, asyncio
may turn it into a cancellation), and one that no command catches ends in ``interrupted()``;
from then on, and while the process exits, another Ctrl-C ends it at once.

A process started with SIGINT ignored (a background job, ``nohup``) keeps ignoring it: only
Python's own default handler is ever replaced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: this module runs before ``typing`` loads
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import NoReturn

__all__ = ["EXIT_INTERRUPTED", "guard", "interrupted", "run_cli"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a job ended by Ctrl-C

_state = {"guarded": False}


def _end_now(signum: int, frame: FrameType | None) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or a broken pipe
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def _set(handler: Callable[[int, FrameType | None], object] | int) -> None:
    with contextlib.suppress(ValueError):  # not the main thread: leave the handler as it is
        signal.signal(signal.SIGINT, handler)


def guard() -> None:
    """From now on, Ctrl-C ends the process with 130 at once (until ``run_cli`` runs the
    command). Does nothing when SIGINT is ignored or already handled by someone else."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        _set(_end_now)
        _state["guarded"] = True


def interrupted() -> NoReturn:
    """Leave after a ``KeyboardInterrupt`` nobody caught: status 130, nothing printed. In a
    guarded process, a further Ctrl-C (while exiting) ends it at once."""
    if _state["guarded"]:
        _set(_end_now)
    raise SystemExit(EXIT_INTERRUPTED)


def run_cli(load: Callable[[], Callable[[], object]]) -> None:
    """Import the command tree (``load``, guarded) and run it with Python's usual SIGINT
    handling; any ``KeyboardInterrupt`` that reaches here ends in ``interrupted()``."""
    try:
        try:
            cli = load()
            if _state["guarded"]:
                _set(signal.default_int_handler)
            cli()
        except KeyboardInterrupt:
            interrupted()
    except KeyboardInterrupt:  # a second Ctrl-C before the first one's exit was set up
        interrupted()
    finally:
        if _state["guarded"]:
            _set(_end_now)
