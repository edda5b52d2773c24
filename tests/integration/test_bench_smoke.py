"""``python tools/bench.py --smoke`` for B1, B2, B3, C and B8 (the load generator, its ceiling,
the limits) and ``tools/bench_receipts.py`` (B12) on a small run.

A real server (and the processes of the scenarios: client processes, SeaweedFS, nginx), run
end to end at the smallest sizes; the report's shape is checked (``tests/bench_world.py``):
B1, B2, B3, C (the ceilings, with B1..B3 as fractions of them) and B8 (the limits, with B2 as a
fraction of them).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import processes
from tests.bench_world import GROUPS, HEADLINES, ROOT, smoke_tests
from tools.bench_report import SCENARIOS as ALL_SCENARIOS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

(
    report,
    test_every_scenario_has_its_figures,
    test_sampled_proofs_verify,
    test_report_names_its_provenance,
) = smoke_tests(__file__)


def test_the_smoke_files_run_every_scenario_once() -> None:
    """The split of the smoke run over files (``GROUPS``) leaves no scenario out."""
    ran = [sid for scenarios in GROUPS.values() for sid in scenarios]
    assert sorted(ran) == sorted(HEADLINES) == sorted(s.id for s in ALL_SCENARIOS)
    here = Path(__file__).parent
    assert sorted(p.stem for p in here.glob("test_bench_smoke*.py")) == sorted(GROUPS)


def test_b12_batch_verification_smoke() -> None:
    """``tools/bench_receipts.py`` (B12) on a small run: every receipt verifies, both paths."""
    done = processes.run(
        [sys.executable, str(ROOT / "tools" / "bench_receipts.py"), "--records", "60",
         "--per-checkpoint", "20", "--runs", "1", "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert results["records"] == 60 and results["checkpoints"] == 3
    for name in ("library, anchors", "library, no anchors", "cli, anchors", "cli, no anchors"):
        assert all(_is_number(v) and v > 0 for v in results[name]["wall"] + results[name]["cpu"])


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
