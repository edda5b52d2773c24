"""Ctrl-C at any moment ends ``ledger``, ``ledger-verify`` and ``python -m ledger`` with status 130
and no traceback: right after spawn, as the entry point starts, while the command tree is being
imported, and while a command runs (blocked reading its stdin).

The moments are found, not slept for: the child runs with ``PYTHONPROFILEIMPORTTIME=1``, so it
reports each module it has imported on stderr (the entry module's line means the guard is in
place; the lines after it are the heavy imports), and "running" means its main thread waits in a
pipe read (``/proc/<pid>/wchan``). The child gets SIGINT at its default disposition, as from a
terminal, even when the suite itself runs with SIGINT ignored (``nohup make test``): a process
started with SIGINT ignored keeps ignoring it, which the last test shows.

What no program can reach is the interpreter's own start-up before the entry point runs: a
SIGINT there ends the process by the signal (no output) or, once Python has installed its
handler (``init_sys_streams``, ``site``), with its own "Fatal Python error: init_..." report.
"Right after spawn" usually lands before that handler, so the process ends by the signal; when
the parent is slow, it may land in the interpreter's initialisation, which the test tells apart.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from tests import processes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="needs Linux /proc"),
]

BIN = Path(sys.executable).parent
VKEY = Ed25519Signer.generate("ledger.test/interrupt").verifier().key_string()
# each command blocks reading stdin until it is closed
PROGRAMS = {
    "ledger": ([str(BIN / "ledger"), "config", "show", "--config", "/dev/stdin"],
               "ledger.cli.entry"),
    "python -m ledger": ([sys.executable, "-m", "ledger", "config", "show", "--config",
                          "/dev/stdin"], "ledger.cli.entry"),
    "ledger-verify": ([str(BIN / "ledger-verify"), "checkpoint", "--key", VKEY, "-"],
                      "ledger_client.cli.entry"),
}  # fmt: skip
TIMEOUT = 60.0


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Child:
    """A CLI process whose stderr lines are collected by a reader thread."""

    def __init__(self, argv: list[str], preexec: Callable[[], None]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env["PYTHONPROFILEIMPORTTIME"] = "1"
        self.proc = processes.spawn_direct(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, preexec_fn=preexec,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_for_import(self, module: str, then: int = 0) -> None:
        """Until ``module`` is imported and ``then`` more modules after it (or the command
        runs)."""
        deadline, seen = time.monotonic() + TIMEOUT, None
        while time.monotonic() < deadline:
            if seen is not None and (seen >= then or self.blocked_reading()):
                return
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            assert line is not None, f"exited before importing {module}: {self.stderr}"
            if seen is not None and line.startswith("import time:"):
                seen += 1
            elif line.rstrip().endswith(f"| {module}"):
                seen = 0
        raise AssertionError(f"{module} not imported within {TIMEOUT}s")

    def blocked_reading(self) -> bool:
        try:
            return Path(f"/proc/{self.proc.pid}/wchan").read_text().endswith("pipe_read")
        except OSError:
            return False

    def wait_until_running(self) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not self.blocked_reading():
            assert self.proc.poll() is None, self.stderr
            assert time.monotonic() < deadline, "the command never waited on its stdin"
            time.sleep(0.01)

    def finish(self) -> tuple[int, str, str]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.proc.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)
        errors = "".join(line for line in self.stderr if not line.startswith("import time:"))
        return self.proc.returncode, out, errors


@contextmanager
def child(program: str, preexec: Callable[[], None] = _default_sigint) -> Iterator[Child]:
    argv, _ = PROGRAMS[program]
    started = Child(argv, preexec)
    try:
        yield started
    finally:
        if started.proc.poll() is None:
            started.proc.kill()
        for pipe in (started.proc.stdin, started.proc.stdout):
            if pipe is not None:
                pipe.close()
        started.proc.wait(timeout=TIMEOUT)


def _interrupted_quietly(result: tuple[int, str, str]) -> None:
    code, out, err = result
    assert "Traceback" not in err + out, err
    assert code == 130, (code, err)
    assert err == "", err  # quiet: no "Aborted!", no "error: interrupted"


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_ctrl_c_right_after_spawn_prints_no_traceback(program: str) -> None:
    with child(program) as started:
        started.proc.send_signal(signal.SIGINT)
        code, out, err = started.finish()
    if err.startswith("Fatal Python error: init_"):
        # the parent was slow and the signal reached the interpreter's own initialisation,
        # which reports it so before any file of the program runs: nothing a program can do
        assert code != 0, (code, err)
        return
    assert "Traceback" not in err + out, err
    assert code in (130, -signal.SIGINT), (code, err)


@pytest.mark.parametrize("after", [0, 1, 40])
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_ctrl_c_while_the_entry_point_imports(program: str, after: int) -> None:
    with child(program) as started:
        started.wait_for_import(PROGRAMS[program][1], then=after)
        started.proc.send_signal(signal.SIGINT)
        _interrupted_quietly(started.finish())


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_ctrl_c_while_a_command_runs(program: str) -> None:
    with child(program) as started:
        started.wait_until_running()
        started.proc.send_signal(signal.SIGINT)
        _interrupted_quietly(started.finish())


def test_a_cli_started_with_sigint_ignored_keeps_ignoring_it() -> None:
    with child("ledger-verify", preexec=_ignore_sigint) as started:
        started.wait_until_running()
        started.proc.send_signal(signal.SIGINT)  # discarded: the disposition is SIG_IGN
        assert started.proc.stdin is not None
        started.proc.stdin.write("not a checkpoint\n")
        started.proc.stdin.close()
        code, _, err = started.finish()
    assert code == 2 and "Traceback" not in err, (code, err)  # the command ran to its end
