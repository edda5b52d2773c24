"""Ceilings: trivial Python gRPC servers with the log's message shapes, ``sync`` or ``aio``.

``python tools/bench_ceiling.py --mode aio`` serves ``LedgerService.AppendRecords`` (unary and
batched), ``AppendPacked`` and ``StreamAppend`` on 127.0.0.1:0 and prints one JSON line
``{"address": ...}``; SIGTERM stops it. Each call is answered with the same messages a log
sends (one result per item: index, 32-byte leaf hash, time; a packed answer with a first index
and no duplicates; one stream ack per 5 ms covering the messages received in it, as the log
acks per group commit) but does no work: no hashing, no storage, no signing. Driven by the same
load generator as the log (``tools/bench_loads.py``: pre-encoded requests from several
processes, or ``RemoteLog`` for the stream), what it reaches is what the gRPC layer and the
clients allow on this machine, the benchmark's own ceiling: ``tools/bench.py`` reports each
append scenario as a fraction of it (scenario C), in total and per server CPU second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ledger.core.limits import MAX_MESSAGE_BYTES  # noqa: E402
from ledger.v1 import ledger_pb2 as pb  # noqa: E402
from ledger.v1 import ledger_pb2_grpc as pb_grpc  # noqa: E402

__all__ = ["main"]

# Acks cover what arrived in the last 5 ms (about one group commit of the log under load), as
# the log's acks cover one group commit each: acking every message makes the one client
# process, not the server, the bottleneck.
ACK_EVERY_S = 0.005
OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


class _Counter:
    """Hands out indexes (the only state a trivial server keeps)."""

    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> int:
        first, self.next = self.next, self.next + n
        return first


def _response(counter: _Counter, request: pb.AppendRecordsRequest) -> pb.AppendRecordsResponse:
    response = pb.AppendRecordsResponse()
    index = counter.take(len(request.items))
    add = response.results.add
    for i, item in enumerate(request.items, index):
        add(index=i, leaf_hash=item.record_digest, timestamp_ms=1)
    return response


def _packed(counter: _Counter, request: pb.AppendPackedRequest) -> pb.AppendPackedResponse:
    n = len(request.record_digests) // 32
    return pb.AppendPackedResponse(first_index=counter.take(n), new_entries=n, timestamp_ms=1)


def _ack(counter: _Counter, position: int, n: int) -> pb.StreamAppendAck:
    first = counter.take(n)
    return pb.StreamAppendAck(
        first_position=position, count=n, first_index=first, new_entries=n, timestamp_ms=1
    )


_CHECKPOINT = pb.Checkpoint(note="trivial\n0\n\n", origin="trivial", size=0, root_hash=bytes(32))


class SyncServicer(pb_grpc.LedgerServiceServicer):
    """The trivial servicer on grpc's thread-pool server (GetCheckpoint: the clients' warm-up)."""

    def GetCheckpoint(self, request: Any, context: Any) -> Any:
        return _CHECKPOINT

    def __init__(self) -> None:
        self._counter = _Counter()
        self._lock = threading.Lock()

    def AppendRecords(self, request: pb.AppendRecordsRequest, context: Any) -> Any:
        with self._lock:
            return _response(self._counter, request)

    def AppendPacked(self, request: pb.AppendPackedRequest, context: Any) -> Any:
        with self._lock:
            return _packed(self._counter, request)

    def StreamAppend(self, request_iterator: Any, context: Any) -> Iterator[Any]:
        """Like the log: a reader thread takes messages; each ack covers all taken since the
        last one (the log acks each group commit)."""
        taken: queue.SimpleQueue[int | None] = queue.SimpleQueue()

        def read() -> None:
            for request in request_iterator:
                taken.put(len(request.items))
            taken.put(None)

        threading.Thread(target=read, daemon=True).start()
        position, done = 0, False
        while not done:
            counts = [taken.get()]
            while not taken.empty():
                counts.append(taken.get())
            done = None in counts
            n = sum(c for c in counts if c is not None)
            if n:
                with self._lock:
                    ack = _ack(self._counter, position, n)
                position += n
                yield ack
                time.sleep(ACK_EVERY_S)


class AioServicer(pb_grpc.LedgerServiceServicer):
    """The trivial servicer on grpc.aio."""

    async def GetCheckpoint(self, request: Any, context: Any) -> Any:
        return _CHECKPOINT

    def __init__(self) -> None:
        self._counter = _Counter()

    async def AppendRecords(self, request: pb.AppendRecordsRequest, context: Any) -> Any:
        return _response(self._counter, request)

    async def AppendPacked(self, request: pb.AppendPackedRequest, context: Any) -> Any:
        return _packed(self._counter, request)

    async def StreamAppend(
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        """Like the log: a reader task takes messages; each ack covers all taken since the last."""
        pending, done, wake = 0, False, asyncio.Event()

        async def read() -> None:
            nonlocal pending, done
            try:
                async for request in request_iterator:
                    pending += len(request.items)
                    wake.set()
            finally:
                done = True
                wake.set()

        reader = asyncio.create_task(read())
        position = 0
        try:
            while True:
                if not pending and not done:
                    wake.clear()
                    await wake.wait()
                if pending:
                    n, pending = pending, 0
                    yield _ack(self._counter, position, n)
                    position += n
                    await asyncio.sleep(ACK_EVERY_S)
                elif done:
                    break
        finally:
            reader.cancel()


def _ready(port: int) -> None:
    print(json.dumps({"address": f"127.0.0.1:{port}"}), flush=True)


def serve_sync() -> None:
    """Serve until SIGTERM on a thread-pool server."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=OPTIONS)
    pb_grpc.add_LedgerServiceServicer_to_server(SyncServicer(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _ready(port)
    stop.wait()
    server.stop(1).wait()


async def serve_aio() -> None:
    """Serve until SIGTERM on grpc.aio."""
    server = grpc.aio.server(options=OPTIONS)
    pb_grpc.add_LedgerServiceServicer_to_server(AioServicer(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    _ready(port)
    await stop.wait()
    await server.stop(1)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="tools/bench_ceiling.py", description=__doc__)
    parser.add_argument("--mode", choices=("sync", "aio"), default="aio")
    args = parser.parse_args(argv)
    if args.mode == "sync":
        serve_sync()
    else:
        asyncio.run(serve_aio())
    return 0


if __name__ == "__main__":
    sys.exit(main())
