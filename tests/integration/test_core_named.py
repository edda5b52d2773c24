"""The server names the core its append path runs on (issue 23 item 3): the start line's
``core`` and the ``ledger_core`` gauge on /metrics, for the compiled core and for the pure twin
forced with ``LEDGER_PURE=1``; appends answer alike on both. The start line's ``cores`` and the
``ledger_core_part`` gauge name every compiled part's core (append path, JSON reader, record
reader)."""

from __future__ import annotations

import hashlib
import urllib.request
from pathlib import Path

import pytest

from ledger.core import accel
from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger_client.remote.log import RemoteLog
from tests.harness import ORIGIN, ServerProcess

pytestmark = [pytest.mark.integration]


def started(tmp_path: Path, name: str) -> tuple[str, str, list[tuple[int, bool]]]:
    """(start line's core, /metrics text, (index, duplicate) of an append with a repeat); the
    start line's ``cores`` are checked against the /metrics parts here."""
    key_file = tmp_path / f"{name}.key"
    write_signer(key_file, Ed25519Signer.generate(ORIGIN))
    server = ServerProcess(tmp_path / name, key_file)
    try:
        digests = [hashlib.sha256(b"%d" % i).digest() for i in (1, 2, 1, 3)]
        with RemoteLog(server.address, timeout=30) as remote:
            results = remote.append(digests).results
        with urllib.request.urlopen(f"http://{server.ready['metrics']}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        assert server.terminate() == 0
    cores = server.ready["cores"]
    assert set(cores) == {"append", "json", "record"} and cores["append"] == server.ready["core"]
    for part, core in cores.items():
        assert f'ledger_core_part{{core="{core}",part="{part}"}} 1.0' in text
    return server.ready["core"], text, [(r.index, r.duplicate) for r in results]


def test_start_line_and_metric_name_the_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    core, metrics, results = started(tmp_path, "selected")
    assert core == accel.CORE
    parts = {"append": accel.CORE, "json": accel.JSON_CORE, "record": accel.RECORD_CORE}
    assert accel.cores() == parts
    assert f'ledger_core{{core="{accel.CORE}"}} 1.0' in metrics
    monkeypatch.setenv("LEDGER_PURE", "1")
    core, metrics, pure_results = started(tmp_path, "pure")
    assert core == "pure"
    assert 'ledger_core{core="pure"} 1.0' in metrics
    for part in ("append", "json", "record"):
        assert f'ledger_core_part{{core="pure",part="{part}"}} 1.0' in metrics
    assert pure_results == results == [(0, False), (1, False), (0, True), (2, False)]
