"""``python tools/bench.py --smoke`` for B13: the log mirrored to a local SeaweedFS bucket.

A real server (and the processes of the scenarios: client processes, SeaweedFS, nginx), run
end to end at the smallest sizes; the report's shape is checked (``tests/bench_world.py``):
B13 (the bucket mirror on and off, its lag, tile GETs from the bucket).
"""

from __future__ import annotations

import pytest

from tests.bench_world import smoke_tests

pytestmark = [pytest.mark.integration, pytest.mark.slow]

(
    report,
    test_every_scenario_has_its_figures,
    test_sampled_proofs_verify,
    test_report_names_its_provenance,
) = smoke_tests(__file__)
