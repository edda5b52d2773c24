"""The bench smoke tests' shared part (``tests/integration/test_bench_smoke*.py``): run
``tools/bench.py --smoke --only ...`` (a real server, client processes, a report) and check the
report of the scenarios it ran. The scenarios are split over several test files, so that
``make test``'s workers can run them side by side; each file's scenarios are the ones that need
each other's figures (C and B8 give B1, B2 and B3 as fractions of their own rates) or share a
log (B5, B6, B7 and B11).

The checks are on the shape of the report (every headline figure a finite number, every
sampled proof verified, the command and the date); the figures themselves depend on the
machine, and at the smoke sizes they say nothing about speed.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from tests import processes

ROOT = Path(__file__).resolve().parents[1]
# every scenario of tools/bench.py and its headline figures
HEADLINES = {
    "B1": ["records_per_s", "p99_ms"],
    "B2": [
        "records_per_s",
        "records_per_server_cpu_s",
        "typed_records_per_s",
        "synced_bound_per_s",
        "of_synced_bound",
    ],
    "B3": ["records_per_s"],
    "B4": ["p99_ms"],
    "B4R": ["p99_ms", "proofs_per_s", "validated"],
    "B5": ["unary_per_s", "batched_per_s", "validated"],
    "B6": ["per_s", "validated"],
    "B7": ["last_over_first", "peak_2m_over_rss_1m", "disk_bytes_per_entry"],
    "B8": ["sha256_per_s", "loop_entries_per_s", "b2_fraction"],
    "B11": ["endpoint_per_s", "client_proofs_per_s", "mirror_lag_p99_ms", "validated"],
    "B13": ["on_over_off_per_cpu", "lag_samples", "bucket_gets_per_s", "endpoint_gets_per_s"],
    # (B4's probe may complete no call inside a short window of primary mode on a busy machine)
    "B14": ["primary_over_local_per_cpu", "primary_b4_samples", "primary_weed_us_per_entry"],
    "C": [
        "aio_unary_per_s",
        "aio_packed_per_s",
        "aio_packed_per_server_cpu_s",
        "aio_stream_per_s",
        "b1_of_aio_unary",
        "b3_of_aio_stream",
        "ceiling_over_b2",
    ],
    "B9": ["log_per_s", "pymerkle_per_s", "log_over_pymerkle", "log_bytes_per_leaf"],
}
# the smoke test files' scenarios: together, every scenario once
GROUPS = {
    "test_bench_smoke": ("B1", "B2", "B3", "C", "B8"),
    "test_bench_smoke_log": ("B4", "B4R", "B5", "B6", "B7", "B11", "B9"),
    "test_bench_smoke_bucket": ("B13",),
    "test_bench_smoke_primary": ("B14",),
}

Report = tuple[dict[str, Any], Path]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def run_smoke(tmp: Path, scenarios: Iterable[str]) -> Report:
    """``tools/bench.py --smoke --only SCENARIOS``: its exit status 0, its JSON report, and the
    folder of its reports."""
    out = tmp / "results"
    cmd = [sys.executable, str(ROOT / "tools" / "bench.py"), "--smoke", "--only",
           ",".join(scenarios), "--out", str(out), "--work-dir", str(tmp)]  # fmt: skip
    proc = processes.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "# Decision Ledger benchmark" in proc.stdout
    return json.loads((out / "bench.json").read_text()), out


def check_figures(report: Report, scenarios: Iterable[str]) -> None:
    """Exactly ``scenarios`` ran, once, each with every headline figure a finite number."""
    runs, _ = report
    by_id = {s["id"]: s for s in runs["scenarios"]}
    assert sorted(by_id) == sorted(scenarios)
    for sid in scenarios:
        figures = {f["name"]: f for f in by_id[sid]["figures"]}
        for name in HEADLINES[sid]:
            fig = figures[name]
            assert _is_number(fig["median"]), f"{sid}.{name} = {fig['median']!r}"
            assert fig["min"] <= fig["median"] <= fig["max"], f"{sid}.{name}"
            assert len(fig["runs"]) == runs["runs"] == 1


def check_proofs(report: Report) -> None:
    """Every scenario that samples proofs verified some and none failed."""
    runs, _ = report
    for s in runs["scenarios"]:
        for f in s["figures"]:
            if f["name"] == "validated":
                assert f["median"] > 0, s["id"]
            if f["name"] == "invalid":
                assert f["max"] == 0, s["id"]


def check_provenance(report: Report) -> None:
    """The report names its command, date and plan; the Markdown has the command and a row
    of each scenario."""
    runs, out = report
    assert "tools/bench.py --smoke --only" in runs["command"]
    assert runs["date"][:2] == "20"
    assert runs["plan"]["segment"] > 0
    markdown = (out / "bench.md").read_text()
    assert runs["command"] in markdown
    for s in runs["scenarios"]:
        assert f"| {s['id']} |" in markdown, s["id"]


def smoke_tests(module: str) -> tuple[Callable[..., Any], ...]:
    """The fixture and the three report checks of one smoke file (``module``: its ``__file__``),
    for its scenarios (``GROUPS``): ``report, test_every_scenario_has_its_figures,
    test_sampled_proofs_verify, test_report_names_its_provenance = smoke_tests(__file__)``."""
    scenarios = GROUPS[Path(module).stem]

    @pytest.fixture(scope="module")
    def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
        return run_smoke(tmp_path_factory.mktemp("bench"), scenarios)

    def test_every_scenario_has_its_figures(report: Report) -> None:
        check_figures(report, scenarios)

    def test_sampled_proofs_verify(report: Report) -> None:
        check_proofs(report)

    def test_report_names_its_provenance(report: Report) -> None:
        check_provenance(report)

    return (
        report,
        test_every_scenario_has_its_figures,
        test_sampled_proofs_verify,
        test_report_names_its_provenance,
    )
