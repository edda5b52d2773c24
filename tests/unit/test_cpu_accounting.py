"""``LEDGER_TEST_CPU=FILE`` (``tests/conftest.py``): a pytest run appends one JSON line per test
with its wall seconds and the CPU seconds of its worker and of the child processes it waited
for."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests import processes

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/unit/test_serve_start.py::test_a_server_without_tsa_or_bucket_loads_neither"


def test_each_test_s_cpu_and_its_children_s_are_recorded(tmp_path: Path) -> None:
    out = tmp_path / "cpu.jsonl"
    env = {**os.environ, "LEDGER_TEST_CPU": str(out)}
    done = processes.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    assert line["test"] == TEST and line["pid"] != os.getpid()
    # the test starts a server in a child Python: its CPU is the child's, not the worker's
    assert line["children_cpu"] > 0.3 > line["cpu"] >= 0
    assert line["wall"] > 0
