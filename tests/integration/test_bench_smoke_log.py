"""``python tools/bench.py --smoke`` for B4, B4R, the big log (B5, B6, B7, B11) and B9.

A real server (and the processes of the scenarios: client processes, SeaweedFS, nginx), run
end to end at the smallest sizes; the report's shape is checked (``tests/bench_world.py``):
B4, B4R, B5, B6, B7 and B11 (one log filled in segments, its tiles mirrored and
served by nginx) and B9 (the peer).
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
