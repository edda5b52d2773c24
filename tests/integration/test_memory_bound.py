"""Issue 22 item 6: memory within a bound that is true. 600 concurrent GetInclusionProofs requests
padded to 1.8 MiB (reads need no token) against a real ``ledger serve``: every one is refused
with RESOURCE_EXHAUSTED and a message, the server's peak RSS (``VmHWM``) stays within its idle
RSS plus the documented bound (``ServerLimits.memory_bound``, docs/operating.md "Streams and
memory"), and a second identical burst does not raise the peak by more than ``TOLERANCE_MB``."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import grpc
import pytest

from ledger.api.server import ServerLimits
from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger.v1 import ledger_pb2 as pb
from ledger_client.remote.log import RemoteLog
from tests.harness import ORIGIN, ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.serial]

METHOD = "/ledger.v1.LedgerService/GetInclusionProofs"
CALLS = 600
CONNECTIONS = 60
MESSAGE_BYTES = int(1.8 * (1 << 20))
# One burst's peak varies with how many reads happen to overlap: up to ~45 MiB on a quiet
# machine, 50 MiB seen with another test run competing for the CPU; a burst holds ~180 MiB, so
# a rise beyond 64 MiB would be memory kept from the first burst.
TOLERANCE_MB = 64.0


def padded_read() -> bytes:
    """A GetInclusionProofsRequest for index 0 with an unknown field padding it to 1.8 MiB."""
    body = pb.GetInclusionProofsRequest(indexes=[0]).SerializeToString()
    pad = MESSAGE_BYTES - len(body) - 6
    varint = bytearray()
    n = pad
    while True:
        varint.append((n & 0x7F) | (0x80 if n >> 7 else 0))
        n >>= 7
        if not n:
            break
    return body + bytes([15 << 3 | 2]) + bytes(varint) + bytes(pad)


async def burst(address: str, payload: bytes) -> Counter[tuple[str, str]]:
    """CALLS requests at once over CONNECTIONS connections: (status, message start) counts."""
    options = [("grpc.max_send_message_length", 64 << 20), ("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(address, options=options) for _ in range(CONNECTIONS)]
    seen: Counter[tuple[str, str]] = Counter()

    async def one(i: int) -> None:
        call = channels[i % CONNECTIONS].unary_unary(METHOD, None, None)
        try:
            await call(payload, timeout=120)
            seen["OK", ""] += 1
        except grpc.aio.AioRpcError as exc:
            seen[exc.code().name, (exc.details() or "")[:12]] += 1

    try:
        await asyncio.gather(*(one(i) for i in range(CALLS)))
    finally:
        await asyncio.gather(*(c.close(None) for c in channels))
    return seen


def memory_mb(pid: int) -> dict[str, float]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(value.split()[0]) / 1024
    return found


def test_padded_reads_stay_within_the_documented_bound(tmp_path: Path) -> None:
    key_file = tmp_path / "log.key"
    write_signer(key_file, Ed25519Signer.generate(ORIGIN))
    server = ServerProcess(tmp_path / "data", key_file)
    try:
        with RemoteLog(server.address, timeout=30) as remote:
            remote.append([bytes(32)], wait_for_checkpoint=True)
            remote.checkpoint()
        idle = memory_mb(server.proc.pid)
        payload = padded_read()
        first = asyncio.run(burst(server.address, payload))
        after_first = memory_mb(server.proc.pid)
        second = asyncio.run(burst(server.address, payload))
        after_second = memory_mb(server.proc.pid)
        with RemoteLog(server.address, timeout=30) as remote:
            assert remote.checkpoint().size == 1  # still serving
    finally:
        server.terminate()
    # the setup client's connection counts too; the tiles/metrics listeners are not loaded
    bound_mb = ServerLimits().memory_bound(CONNECTIONS + 1) / (1 << 20)
    report = f"idle {idle}, after the bursts {after_first} / {after_second}, bound {bound_mb} MiB"
    for seen in (first, second):
        assert sum(seen.values()) == CALLS
        for (code, message), _count in seen.items():
            assert code == "RESOURCE_EXHAUSTED", (seen, report)
            assert message.startswith(("a request of", "a request re")), (seen, report)
    assert after_first["VmHWM"] <= idle["VmHWM"] + bound_mb, report
    assert after_second["VmHWM"] <= after_first["VmHWM"] + TOLERANCE_MB, report
