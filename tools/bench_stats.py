"""Benchmark arithmetic and process readings: percentiles, run summaries, RSS, CPU time, disk use.

Pure helpers for ``tools/bench.py``; the ``/proc`` readers are Linux-only (as is the benchmark).
A figure is measured once per run; ``summarize`` turns the runs into median, min and max.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ProcSample",
    "Summary",
    "disk_bytes",
    "percentile",
    "proc_sample",
    "summarize",
]

_TICKS = os.sysconf("SC_CLK_TCK")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by the nearest-rank method; NaN when ``values`` is empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[min(int(rank), len(ordered)) - 1]


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """One figure over several runs."""

    median: float
    low: float
    high: float
    runs: tuple[float, ...]

    def to_json(self) -> dict[str, object]:
        """Plain values (``min``/``max`` spelled out)."""
        return {"median": self.median, "min": self.low, "max": self.high, "runs": list(self.runs)}


def summarize(runs: Sequence[float]) -> Summary:
    """Median, min and max of the per-run values (requires at least one run)."""
    if not runs:
        raise ValueError("summarize needs at least one run")
    return Summary(median=statistics.median(runs), low=min(runs), high=max(runs), runs=tuple(runs))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcSample:
    """A process's resident memory now and at its peak, and its CPU seconds so far."""

    rss_bytes: int
    hwm_bytes: int
    cpu_s: float


def proc_sample(pid: int) -> ProcSample:
    """Read ``/proc/<pid>/status`` (VmRSS, VmHWM) and ``/proc/<pid>/stat`` (utime + stime)."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(rest.split()[0]) * 1024
    stat = Path(f"/proc/{pid}/stat").read_text()
    after_name = stat.rsplit(")", 1)[1].split()
    ticks = int(after_name[11]) + int(after_name[12])  # fields 14 and 15 of proc(5)
    return ProcSample(
        rss_bytes=fields.get("VmRSS", 0), hwm_bytes=fields.get("VmHWM", 0), cpu_s=ticks / _TICKS
    )


def disk_bytes(path: Path) -> int:
    """Allocated bytes under ``path`` (what ``du`` counts: 512-byte blocks of every file)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.lstat(Path(root) / name).st_blocks * 512
    return total
