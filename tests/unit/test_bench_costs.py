"""B2's CPU per record against what issue 23's per-core and bound targets allow
(``tools.bench_scenarios._record_costs``): the arithmetic the report's floor figures rest on."""

from __future__ import annotations

import math

import pytest

from tools.bench_scenarios import _record_costs


def test_the_floor_and_the_targets_allowances() -> None:
    b2 = {
        "synced_bound_per_s": 1_000_000.0,
        "synced_bound_cpu_us": 0.5,
        "server_cpu_us": 3.0,
        "client_cpu_us": 1.0,
    }
    costs = _record_costs(b2, trivial_per_cpu_s=2_000_000.0)
    assert costs["aio_packed_cpu_us"] == pytest.approx(0.5)
    assert costs["b2_floor_cpu_us"] == pytest.approx(1.0)  # gRPC alone + the writes alone
    assert costs["b2_over_floor"] == pytest.approx(3.0)
    assert costs["per_core_target_cpu_us"] == pytest.approx(2.0)  # 0.25 of 2M per CPU second
    # 800,000 records/s (0.8 of the bound) at 1 + 1 µs, and at 3 + 1 µs
    assert costs["bound_target_floor_cores"] == pytest.approx(1.6)
    assert costs["bound_target_cores"] == pytest.approx(3.2)


def test_a_run_without_a_rate_gives_nan_not_an_error() -> None:
    b2 = {
        "synced_bound_per_s": 1_000_000.0,
        "synced_bound_cpu_us": 0.5,
        "server_cpu_us": math.nan,
        "client_cpu_us": math.nan,
    }
    costs = _record_costs(b2, trivial_per_cpu_s=0.0)
    assert all(math.isnan(costs[k]) for k in ("aio_packed_cpu_us", "bound_target_cores"))
