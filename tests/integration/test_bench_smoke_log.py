"""``python tools/bench.py --smoke`` for B4, B4R, the big log (B5, B6, B7, B11) and B9.

A real server (and the processes of the scenarios: client processes, SeaweedFS, nginx), run
end to end at the smallest sizes; the report's shape is checked (``tests/bench_world.py``):
B4, B4R, B5, B6, B7 and B11 (one log filled in segments, its tiles mirrored and
served by nginx) and B9 (the peer).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench_world import (
    GROUPS,
    Report,
    check_figures,
    check_proofs,
    check_provenance,
    run_smoke,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCENARIOS = GROUPS[Path(__file__).stem]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return run_smoke(tmp_path_factory.mktemp("bench"), SCENARIOS)


def test_every_scenario_has_its_figures(report: Report) -> None:
    check_figures(report, SCENARIOS)


def test_sampled_proofs_verify(report: Report) -> None:
    check_proofs(report)


def test_report_names_its_provenance(report: Report) -> None:
    check_provenance(report)
