"""A repeating internal fault is logged once with its traceback, then folded: one line per kind
of error per minute (``ledger.net.listener.CollapsingLogger``), in the gRPC servicer's
``_guarded`` and in the embedded TSA's handler; the callers still get their clear answer
(INTERNAL, HTTP 500) every time."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sys
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from ledger.api.server import create_server
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import TimestampError
from ledger.core.types import BackupOutcome
from ledger.log.facade import Log
from ledger.log.service import LogService
from ledger.net.listener import FOLD_S, CollapsingLogger
from ledger.store.contract import MemoryStore
from ledger.tsa.authority import SerialNumbers
from ledger.tsa.client import TsaAuthority, TsaClient, TsaServer
from ledger.v1 import ledger_pb2 as pb
from ledger.v1 import ledger_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration

ORIGIN = "ledger.test/internal-errors"
CALLS = 5


def test_a_repeating_internal_error_in_the_servicer_is_logged_once_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)

    async def broken_backup(out_dir: str) -> BackupOutcome:  # a bug in an injected part
        raise KeyError(f"backup bug {out_dir}"[:11])

    async def main() -> None:
        log = Log(store=MemoryStore(), signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        service = LogService(log, checkpoint_interval=0.01)
        await service.start()
        server, port = await create_server(service, "127.0.0.1:0", backup=broken_backup)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = pb_grpc.LedgerServiceStub(channel)  # type: ignore[no-untyped-call]
                for n in range(CALLS):
                    with pytest.raises(grpc.aio.AioRpcError) as failed:
                        await stub.Backup(pb.BackupRequest(out_dir=f"/tmp/b{n}"), timeout=10)
                    assert failed.value.code() == grpc.StatusCode.INTERNAL
                    assert failed.value.details() == "internal error (see server log)"
        finally:
            await server.stop(1)
            await service.stop()

    asyncio.run(main())
    logged = [r for r in caplog.records if r.name.startswith("ledger.server")]
    assert len(logged) == 1, [r.getMessage() for r in logged]  # was one traceback per call
    assert logged[0].getMessage() == "internal error in Backup"
    assert logged[0].exc_info is not None and logged[0].exc_info[0] is KeyError


def test_a_failing_tsa_is_logged_once_with_its_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    # a serial store that cannot be written (its folder is missing): every query fails
    serials = SerialNumbers(state_file=tmp_path / "gone" / "serial", block=0)
    authority = replace(TsaAuthority.generate("Broken TSA"), serials=serials)
    digest = hashlib.sha256(b"checkpoint").digest()
    with TsaServer(authority) as server:
        client = TsaClient(server.url, timeout=10, roots=[authority.root_cert])
        for _ in range(CALLS):
            with pytest.raises(TimestampError, match="answered HTTP 500"):
                client.timestamp(digest)
    logged = [r for r in caplog.records if r.name.startswith("ledger.tsa")]
    assert len(logged) == 1, [r.getMessage() for r in logged]
    assert logged[0].getMessage() == "TSA failed to answer a query"
    assert logged[0].exc_info is not None and logged[0].exc_info[1] is not None


def test_folded_lines_come_once_a_minute_per_kind_without_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    logger = CollapsingLogger("ledger.test.internal", first_traceback=True, clock=lambda: now[0])
    caplog.set_level(logging.ERROR, logger="ledger.test")

    def fail(kind: type[Exception], where: str) -> None:
        try:
            raise kind("boom")
        except Exception:
            logger.exception("internal error in %s", where)

    for _ in range(3):
        fail(KeyError, "A")
        fail(ValueError, "A")  # another kind: its own first line, with its traceback
        fail(KeyError, "B")
    assert [(r.getMessage(), r.exc_info is not None) for r in caplog.records] == [
        ("internal error in A", True),
        ("internal error in A", True),
        ("internal error in B", True),
    ]
    caplog.clear()
    now[0] += FOLD_S
    fail(KeyError, "A")
    fail(KeyError, "A")
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("internal error in A: KeyError: 'boom' (2 more like it in the last 60 s)", None)
    ]
    assert sys.exc_info() == (None, None, None)
