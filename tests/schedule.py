"""The order ``make pytest`` hands test files to its xdist workers: the longest files first.

With ``--dist loadfile`` each worker takes whole files, one at a time as it runs out of work,
in the order of the collection (``--no-loadscope-reorder``; xdist's own default orders files by
their number of tests, which put the long files of one or two tests, the crash run, the bench
smoke, last, where one of them could hold a worker alone while the other was done). Starting
with the longest (the "longest processing time first" rule) the many short files fill in at the
end and the workers finish close together. ``tests/conftest.py`` sorts the collection with
``order``; a file not named here keeps its place after these, in collection order.

The seconds: each file's total (set-up, calls, tear-down) on one worker of ``make pytest``
(``--junitxml``; 2026-12-01, the shared 2-core machine, load 4-10), rounded. Only the order
matters; a stale figure costs some balance, never a test. The files added on 2026-12-02 (the
property tests of the fast record reading and JCS, the wire tests' mypy run) had been left to
the end, where the record reading alone (~80 s of CPU) held one worker after the others were
done; their figures are their CPU seconds in a three-worker run (they wait on nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
LONGEST: dict[str, int] = {
    "unit/test_verify_fuzz.py": 200,
    "integration/test_objstore.py": 150,
    "integration/test_primary_takeover.py": 140,
    "integration/test_evidence.py": 125,
    "property/test_hot_twins.py": 105,
    "property/test_strictjson_twins.py": 90,
    "integration/test_crash.py": 90,
    "integration/test_access_closed.py": 80,
    "integration/test_bench_smoke.py": 65,
    "integration/test_bench_smoke_log.py": 57,
    "integration/test_cli_errors.py": 56,
    "integration/test_objstore_primary.py": 55,
    "integration/test_fsck_damaged_block.py": 55,
    "integration/test_audit_walkthrough.py": 50,
    "integration/test_crash_harness.py": 45,
    "integration/test_objstore_mirror.py": 44,
    "integration/test_wheel.py": 43,
    "property/test_records_property.py": 80,
    "property/test_receipt_property.py": 42,
    "integration/test_disk_full.py": 39,
    "integration/test_tiles_server.py": 35,
    "integration/test_rollback.py": 34,
    "integration/test_split_view.py": 34,
    "integration/test_bench_smoke_bucket.py": 33,
    "integration/test_acknowledged.py": 33,
    "integration/test_bench_smoke_primary.py": 31,
    "integration/test_anchoring.py": 30,
    "integration/test_readme.py": 29,
    "integration/test_objstore_go.py": 25,
    "integration/test_serve_cli.py": 24,
    "unit/test_wire.py": 18,
    "property/test_jcs_fast_property.py": 12,
}


def order(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place: the files of ``LONGEST`` first, longest first; the others after
    them as collected. A file's tests keep their order and stay together."""
    seconds = {TESTS / name: s for name, s in LONGEST.items()}
    first = {path: n for n, path in enumerate(sorted(seconds, key=lambda p: -seconds[p]))}
    items.sort(key=lambda item: first.get(item.path, len(first)))


def named_files() -> Sequence[Path]:
    """The files ``LONGEST`` names (for the rule that each still exists)."""
    return [TESTS / name for name in LONGEST]
