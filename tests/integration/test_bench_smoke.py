"""``python tools/bench.py --quick`` runs end to end: a real server, client processes, a report.

The smoke test only checks the shape of the report (every scenario B1..B9, B11, B13, B14 and C, with
numbers, the command and the date); the figures themselves depend on the machine.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import processes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
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
    # (B4's probe may complete no call inside a 2 s window of primary mode on a busy machine)
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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "results"
    cmd = [sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--out", str(out)]
    proc = processes.run(
        [*cmd, "--work-dir", str(tmp)], capture_output=True, text=True, timeout=720, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "# Decision Ledger benchmark" in proc.stdout
    return json.loads((out / "bench.json").read_text()), out


def test_every_scenario_has_its_figures(quick_report: tuple[dict[str, Any], Path]) -> None:
    report, _ = quick_report
    scenarios = {s["id"]: s for s in report["scenarios"]}
    assert sorted(scenarios) == sorted(HEADLINES)
    for sid, names in HEADLINES.items():
        figures = {f["name"]: f for f in scenarios[sid]["figures"]}
        for name in names:
            fig = figures[name]
            assert _is_number(fig["median"]), f"{sid}.{name} = {fig['median']!r}"
            assert fig["min"] <= fig["median"] <= fig["max"], f"{sid}.{name}"
            assert len(fig["runs"]) == report["runs"] == 1


def test_sampled_proofs_verify(quick_report: tuple[dict[str, Any], Path]) -> None:
    report, _ = quick_report
    for s in report["scenarios"]:
        for f in s["figures"]:
            if f["name"] == "validated":
                assert f["median"] > 0, s["id"]
            if f["name"] == "invalid":
                assert f["max"] == 0, s["id"]


def test_report_names_its_provenance(quick_report: tuple[dict[str, Any], Path]) -> None:
    report, out = quick_report
    assert "tools/bench.py --quick" in report["command"]
    assert report["date"][:2] == "20"
    assert report["plan"]["segment"] > 0
    markdown = (out / "bench.md").read_text()
    assert report["command"] in markdown
    assert "| B8 |" in markdown


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
