"""``python tools/bench.py --smoke`` for B14: primary mode on a local SeaweedFS.

A real server (and the processes of the scenarios: client processes, SeaweedFS, nginx), run
end to end at the smallest sizes; the report's shape is checked (``tests/bench_world.py``):
B14 (B2 and B4 local-only, then with the bucket as the primary store).
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
