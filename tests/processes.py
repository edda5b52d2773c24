"""Child processes for the tests: every one in its own process group, with default signals.

``spawn`` and ``run`` stand in for ``subprocess.Popen`` and ``subprocess.run``. Each child:

- starts a new session (``start_new_session=True``), so it leads a process group of its own and
  everything it starts in turn (``ledger serve`` starts helpers) can be killed with it;
- starts with default signal dispositions and an empty signal mask. A shell running ``make test``
  in the background (``&``, ``nohup``, CI runners) ignores SIGINT, and an ignored signal stays
  ignored across ``fork`` and ``exec``: a ``ledger`` child would then never see the SIGINT a test
  sends it. A small stub resets the dispositions and then ``exec``s the real command (same pid).

A test that fails or times out does not leave processes behind: ``run`` and ``wait`` kill the
whole group on timeout, and ``reap`` (called after every test by the autouse fixture in
``tests/conftest.py``, and at the end of the session) kills every group a test started that
still has a member. So a process belongs to the test that started it: a fixture wider than one
test starts its process with ``spawn_session`` (not reaped after each test) and kills it itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

# Run by ``python -S -c`` before the real command: default dispositions, nothing blocked, exec.
_RESET = """\
import os, signal, sys
for name in ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM", "SIGPIPE", "SIGXFSZ", "SIGUSR1", "SIGUSR2"):
    signal.signal(getattr(signal, name), signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_SETMASK, ())
os.execvp(sys.argv[1], sys.argv[1:])
"""

Command = Sequence[str | os.PathLike[str]]

_started: list[tuple[subprocess.Popen[Any], str]] = []


def with_default_signals(args: Command) -> list[str]:
    """``args`` behind the stub that resets signal dispositions, then execs them."""
    if isinstance(args, str | bytes):
        raise TypeError("give the command as a list of arguments, not a string")
    return [sys.executable, "-S", "-c", _RESET, *(os.fspath(a) for a in args)]


def spawn(args: Command, **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **kwargs)`` in a new process group, with default signals."""
    if kwargs.pop("shell", False) or not kwargs.pop("start_new_session", True):
        raise ValueError("test processes run without a shell, each in its own session")
    proc: subprocess.Popen[Any] = subprocess.Popen(
        with_default_signals(args), start_new_session=True, **kwargs
    )
    _started.append((proc, " ".join(os.fspath(a) for a in args)))
    return proc


def spawn_session(args: Command, **kwargs: Any) -> subprocess.Popen[Any]:
    """Like ``spawn`` but not reaped after the test: for a session-wide fixture (the shared
    SeaweedFS), which kills the group itself (``kill_group``) when the session ends."""
    if kwargs.pop("shell", False) or not kwargs.pop("start_new_session", True):
        raise ValueError("test processes run without a shell, each in its own session")
    return subprocess.Popen(with_default_signals(args), start_new_session=True, **kwargs)


def spawn_direct(args: Command, **kwargs: Any) -> subprocess.Popen[Any]:
    """Like ``spawn`` but without the stub: the command is exec'd directly, with the signal
    dispositions the caller sets in ``preexec_fn`` (for tests of signal handling itself, where
    the child's own start-up must be what receives the signal). Still a group of its own, still
    reaped after the test."""
    if kwargs.pop("shell", False) or not kwargs.pop("start_new_session", True):
        raise ValueError("test processes run without a shell, each in its own session")
    proc: subprocess.Popen[Any] = subprocess.Popen(
        [os.fspath(a) for a in args], start_new_session=True, **kwargs
    )
    _started.append((proc, " ".join(os.fspath(a) for a in args)))
    return proc


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the child's whole process group; reap the child; close its pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL is not refused
        proc.wait(timeout=30)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def group_alive(proc: subprocess.Popen[Any]) -> bool:
    """Whether any process is left in the child's group (the child itself or what it started)."""
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - the pgid was reused by someone else's group
        return False
    return True


def wait(proc: subprocess.Popen[Any], timeout: float) -> int:
    """``proc.wait(timeout)``; on timeout the group is killed and TimeoutExpired raised."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise


def run(
    args: Command,
    *,
    input: str | bytes | None = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` with ``spawn``: on timeout (or any error) the whole group is killed."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    proc = spawn(args, **kwargs)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except BaseException:
        kill_group(proc)
        raise
    done = subprocess.CompletedProcess(list(args), proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def reap() -> list[str]:
    """Kill every group started since the last call that still has a member; name them."""
    left = []
    while _started:
        proc, command = _started.pop()
        if group_alive(proc):
            left.append(command)
        kill_group(proc)
    return left
