"""``python tools/bench.py --smoke`` for B13: the log mirrored to a local SeaweedFS bucket.

A real server (and the processes of the scenarios: client processes, SeaweedFS, nginx), run
end to end at the smallest sizes; the report's shape is checked (``tests/bench_world.py``):
B13 (the bucket mirror on and off, its lag, tile GETs from the bucket).
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
