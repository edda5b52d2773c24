"""What starting a server costs: ``ledger serve``'s app (``ledger.app.compose``), started and
stopped in a fresh Python, loads RFC 3161 and ASN.1 parsing (``ledger.timestamp.rfc3161``,
``asn1crypto``, the TSA client) only when a TSA is configured, and the object store (``botocore``,
``ledger.objstore``) only when a bucket is. The test suite starts a few hundred servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests import processes

PROBE = """
import asyncio, json, sys
from pathlib import Path
import ledger.cli.serve
from ledger.app.compose import start_app
from ledger.app.settings import Settings
from ledger.core.checkpoint import Ed25519Signer

async def main() -> None:
    settings = Settings(origin="ledger.test/start", data_dir=Path(sys.argv[1]),
                        listen="127.0.0.1:0", anchor_interval_s=0, metrics_listen="",
                        embedded_tsa=sys.argv[2] == "tsa")
    app = await start_app(settings, Ed25519Signer.generate("ledger.test/start"))
    assert app.port > 0 and app.tiles_url is not None
    await app.stop()

asyncio.run(main())
print(json.dumps(sorted(sys.modules)))
"""

TSA_ONLY = ("ledger.timestamp.rfc3161", "ledger.timestamp.asn1", "asn1crypto", "ledger.tsa.client")
STORE_ONLY = ("botocore", "boto3", "ledger.objstore.bucket", "ledger.app.primary_mode")


def _started(data_dir: Path, tsa: bool) -> set[str]:
    out = processes.run(
        [sys.executable, "-c", PROBE, str(data_dir), "tsa" if tsa else "none"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.rstrip("\n").rpartition("\n")[2]))


@pytest.mark.integration
def test_a_server_without_tsa_or_bucket_loads_neither(tmp_path: Path) -> None:
    loaded = _started(tmp_path / "data", tsa=False)
    assert "aiohttp" in loaded and "grpc" in loaded  # it did start (tiles and gRPC)
    assert not [m for m in loaded if m.startswith(TSA_ONLY + STORE_ONLY)]


@pytest.mark.integration
def test_a_server_with_the_embedded_tsa_loads_rfc3161(tmp_path: Path) -> None:
    """The probe sees what a start loads: the embedded TSA brings RFC 3161 in."""
    loaded = _started(tmp_path / "data", tsa=True)
    assert {"ledger.timestamp.rfc3161", "asn1crypto", "ledger.tsa.client"} <= loaded
    assert not [m for m in loaded if m.startswith(STORE_ONLY)]


SERVE_PROBE = """
import asyncio, gc, json, signal, sys, weakref
from pathlib import Path
from ledger.app.compose import serve
from ledger.app.settings import Settings

class Node:
    pass

seen = {}

def ready(app):
    seen["frozen"] = gc.get_freeze_count()
    seen["tracked"] = len(gc.get_objects())
    cycle = Node()
    cycle.me = cycle  # garbage made after the start is still collected
    gone = weakref.ref(cycle)
    del cycle
    gc.collect()
    seen["cycle_collected"] = gone() is None
    signal.raise_signal(signal.SIGTERM)

settings = Settings(origin="ledger.test/start", data_dir=Path(sys.argv[1]),
                    listen="127.0.0.1:0", anchor_interval_s=0, metrics_listen="",
                    key_file=Path(sys.argv[1]).with_name("signer.key"))
asyncio.run(serve(settings, ready))
print(json.dumps(seen))
"""


@pytest.mark.integration
def test_serve_freezes_the_objects_made_at_start(tmp_path: Path) -> None:
    """``serve`` moves what start made to the collector's permanent generation (the full
    collections under load then walk only newer objects), and later garbage still goes."""
    out = processes.run(
        [sys.executable, "-c", SERVE_PROBE, str(tmp_path / "data")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.rstrip("\n").rpartition("\n")[2])
    assert seen["frozen"] > 10_000, seen  # the modules, grpc, the store...
    assert seen["tracked"] < seen["frozen"] // 4, seen  # ...no longer walked by a collection
    assert seen["cycle_collected"], seen
