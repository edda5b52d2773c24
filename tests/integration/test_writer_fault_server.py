"""Over gRPC: after a writer fault the health service says NOT_SERVING and appends fail at once
with UNAVAILABLE and a message; reads still work; the server stops promptly."""

from __future__ import annotations

import asyncio
import hashlib
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ledger.api.server import create_server
from ledger.core.checkpoint import Ed25519Signer
from ledger.log.facade import Log
from ledger.log.service import LogService
from ledger.store.contract import MemoryStore
from ledger.v1 import ledger_pb2 as pb
from ledger.v1 import ledger_pb2_grpc as pb_grpc
from tests.waits import wait_until_async

pytestmark = [pytest.mark.integration]

ORIGIN = "ledger.test/fault-server"


def request(tag: str) -> pb.AppendRecordsRequest:
    digest = hashlib.sha256(tag.encode()).digest()
    return pb.AppendRecordsRequest(items=[pb.AppendItem(record_digest=digest)])


def test_health_goes_not_serving_and_appends_fail_at_once() -> None:
    full = {"on": False}

    def fault(point: str) -> None:
        if full["on"] and point == "commit":
            raise OSError(28, "No space left on device")

    async def main() -> None:
        log = Log(store=MemoryStore(fault=fault), signer=Ed25519Signer.generate(ORIGIN),
                  origin=ORIGIN)  # fmt: skip
        service = LogService(log, checkpoint_interval=0.01)
        await service.start()
        server, port = await create_server(service, "127.0.0.1:0")
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                health = health_pb2_grpc.HealthStub(channel)
                stub = pb_grpc.LedgerServiceStub(channel)  # type: ignore[no-untyped-call]
                check = health_pb2.HealthCheckRequest()
                assert (await health.Check(check)).status == health_pb2.HealthCheckResponse.SERVING
                await stub.AppendRecords(request("ok"))
                full["on"] = True
                with pytest.raises(grpc.aio.AioRpcError) as first:
                    await stub.AppendRecords(request("fails"), timeout=10)
                assert first.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "No space left on device" in (first.value.details() or "")

                async def not_serving() -> bool:
                    status = (await health.Check(check)).status
                    return bool(status == health_pb2.HealthCheckResponse.NOT_SERVING)

                await wait_until_async(not_serving, timeout=10, what="health NOT_SERVING")
                started = time.monotonic()
                with pytest.raises(grpc.aio.AioRpcError) as later:
                    await stub.AppendRecords(request("later"), timeout=10)
                assert later.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "restart" in (later.value.details() or "")
                assert time.monotonic() - started < 1
                assert (await stub.GetCheckpoint(pb.GetCheckpointRequest())).size == 1
        finally:
            started = time.monotonic()
            await server.stop(1)
            await service.stop()
            assert time.monotonic() - started < 3

    asyncio.run(main())
