"""A short run of the long crash harness (``tools/crash.py``): kill -9 under load, around
checkpoints and anchors and in recovery, a WAL byte flipped, a backup restored and caught up;
every invariant checked by the independent verifier at the end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests import processes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_crash_run_keeps_every_promise(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "tools" / "crash.py"), "--cycles", "10", "--json",
           "--scenario-every", "3", "--seed", "14", "--work-dir", str(tmp_path)]  # fmt: skip
    done = processes.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    summary = json.loads(done.stdout)
    assert done.returncode == 0, summary["violations"]
    assert summary["lost"] == 0 and summary["sizes_with_two_roots"] == 0
    kinds = summary["kills_and_scenarios"]
    assert {"kill:load", "kill:checkpoint", "kill:anchor", "kill:recovery"} <= kinds.keys()
    assert kinds.get("backup:refused", 0) + kinds.get("backup:not behind the mark", 0) == 1
    assert kinds.get("wal:refused", 0) + kinds.get("wal:skipped (WAL empty)", 0) == 1
    assert summary["acknowledged"] > 1000
