"""The loads a benchmark worker runs (``Task.kind``): appends, a stream, a checkpoint probe, a
fill, inclusion / consistency proofs at random historical sizes, and raw appends.

Most calls go through ``RemoteLog``, the client agents use. The ``raw`` load is the one that must
not be the bottleneck (B1, B2 and their ceilings): its requests are encoded before the clock
starts (``prepare_task``) and sent as bytes by a grpc.aio channel with ``Task.threads`` calls in
flight, and the answers are not decoded, so each call costs the client one grpc.aio round trip
and nothing per digest. Digests are fresh random bytes, so every append is new (no dedup hits)
until a worker's pool of requests runs out (``Outcome.reused`` counts resent ones). Proof answers
are sampled and checked after the window (``tools.bench_verify``), so checking costs no measured
time.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc

from ledger.core.errors import LedgerError
from ledger.core.limits import MAX_MESSAGE_BYTES
from ledger.core.types import ConsistencyProof, InclusionProof
from ledger.v1 import ledger_pb2 as pb
from ledger_client.remote.log import RemoteLog
from tools.bench_clients import Outcome, Task, Window, sleep_until
from tools.bench_http import tiles_load
from tools.bench_verify import Head, Tally, check_consistency, check_inclusion

__all__ = ["fresh_digests", "in_threads", "prepare_task", "run_task"]

PROBE_POLL_S = 0.002
RETRY_PAUSE_S = 0.05

Call = Callable[[random.Random], int]  # one RPC; returns the records (digests or proofs) it did


def fresh_digests(n: int) -> list[bytes]:
    """``n`` random 32-byte record digests."""
    blob = os.urandom(32 * n)
    return [blob[i : i + 32] for i in range(0, len(blob), 32)]


def _timed_thread(call: Call, window: Window, rng: random.Random) -> Outcome:
    out = Outcome()
    sleep_until(window.start)
    while (t0 := time.monotonic()) < window.end:
        try:
            n = call(rng)
        except (grpc.RpcError, LedgerError) as exc:  # RemoteLog raises LedgerError: count it too
            out.error(exc)
            time.sleep(RETRY_PAUSE_S)
            continue
        t1 = time.monotonic()
        if window.inside(t1):
            out.calls += 1
            out.records += n
            out.latencies_ms.append((t1 - t0) * 1000)
    return out


def _in_threads(task: Task, body: Callable[[int], Outcome]) -> Outcome:
    """Run ``body(k)`` in ``task.threads`` threads; merge their outcomes."""
    results: list[Outcome] = [Outcome() for _ in range(task.threads)]

    def run(k: int) -> None:
        results[k] = body(k)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(task.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = Outcome()
    for r in results:
        total.merge(r)
    return total


in_threads = _in_threads


def _timed(task: Task, window: Window, call: Call) -> Outcome:
    return _in_threads(
        task, lambda k: _timed_thread(call, window, random.Random(task.seed * 1000 + k))
    )


# --- appends ----------------------------------------------------------------------------------


def _append(task: Task, remote: RemoteLog, window: Window) -> Outcome:
    """B2; with ``task.rate``, calls start on a fixed schedule (open loop) at that rate."""
    lock = threading.Lock()
    due = [window.start]

    def call(rng: random.Random) -> int:
        if task.rate > 0:
            with lock:
                at = due[0] = max(due[0], time.monotonic() - 1.0) + task.batch / task.rate
            sleep_until(at)
        remote.append(fresh_digests(task.batch))
        return task.batch

    return _timed(task, window, call)


def _fill(task: Task, remote: RemoteLog, window: Window) -> Outcome:
    """Append exactly ``task.count`` new digests in batches of ``task.batch``, then stop."""
    left = [task.count]
    lock = threading.Lock()

    def take() -> int:
        with lock:
            n = min(task.batch, left[0])
            left[0] -= n
            return n

    def body(k: int) -> Outcome:
        out = Outcome()
        sleep_until(window.start)
        while n := take():
            digests = fresh_digests(n)
            while True:  # a retried batch is deduplicated, so the count stays exact
                try:
                    remote.append(digests)
                    break
                except grpc.RpcError as exc:
                    out.error(exc)
                    time.sleep(RETRY_PAUSE_S)
            out.calls += 1
            out.records += n
            out.elapsed_s = time.monotonic() - window.start
        return out

    return _in_threads(task, body)


def _stream(task: Task, remote: RemoteLog, window: Window) -> Outcome:
    """One stream of single-digest messages until the window ends; acks timed per record."""
    sent: list[float] = []
    out = Outcome()

    def messages() -> Iterator[list[bytes]]:
        sleep_until(window.start)
        while (now := time.monotonic()) < window.end:
            sent.append(now)
            yield fresh_digests(task.batch)

    try:
        for ack in remote.stream_append(messages()):
            now = time.monotonic()
            if window.inside(now):
                out.calls += 1
                out.records += ack.count
                first = ack.first_position // task.batch
                last = (ack.first_position + ack.count) // task.batch
                out.extra_ms.extend((now - t) * 1000 for t in sent[first:last])
    except grpc.RpcError as exc:  # the stream ends: report what was acknowledged until then
        out.error(exc)
    return out


def _probe(task: Task, remote: RemoteLog, window: Window) -> Outcome:
    """Append one digest, then poll until a checkpoint covers it; time both steps."""
    out = Outcome()
    sleep_until(window.start)
    while (t0 := time.monotonic()) < window.end:
        try:
            index = remote.append(fresh_digests(1)).results[0].index
            t1 = time.monotonic()
            while remote.checkpoint().size <= index:
                time.sleep(PROBE_POLL_S)
        except grpc.RpcError as exc:
            out.error(exc)
            continue
        t2 = time.monotonic()
        if window.inside(t1):
            out.calls += 1
            out.records += 1
            out.latencies_ms.append((t1 - t0) * 1000)
            out.extra_ms.append((t2 - t1) * 1000)
    return out


def _health(task: Task, remote: RemoteLog, window: Window) -> Outcome:
    """The gRPC floor: trivial unary calls (grpc.health.v1 Check) on a channel of their own."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(task.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest()
        stub.Check(request, timeout=30)

        def call(rng: random.Random) -> int:
            stub.Check(request, timeout=30)
            return 1

        return _timed(task, window, call)


# --- raw appends: pre-encoded requests, answers not decoded ---------------------------------


def raw_requests(rpc: str, batch: int, count: int) -> list[bytes]:
    """``count`` encoded requests (stream messages) of ``batch`` fresh digests each for ``rpc``."""
    out = []
    for _ in range(count):
        blob = os.urandom(32 * batch)
        if rpc == "StreamAppend":
            request: Any = pb.StreamAppendRequest()
            add = request.items.add
            for i in range(0, len(blob), 32):
                add(record_digest=blob[i : i + 32])
        elif rpc == "AppendPacked":
            request = pb.AppendPackedRequest(record_digests=blob)
        elif rpc == "AppendRecords":
            request = pb.AppendRecordsRequest()
            add = request.items.add
            for i in range(0, len(blob), 32):
                add(record_digest=blob[i : i + 32])
        else:
            raise ValueError(f"raw load: unknown rpc {rpc!r}")
        out.append(request.SerializeToString())
    return out


async def _raw_async(task: Task, window: Window, requests: list[bytes]) -> Outcome:
    out = Outcome()
    options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
               ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]  # fmt: skip
    async with grpc.aio.insecure_channel(task.address, options=options) as channel:
        method = f"/ledger.v1.LedgerService/{task.rpc}"
        call = channel.unary_unary(method, None, None)  # bytes both ways
        await channel.channel_ready()
        taken = 0

        async def lane() -> None:
            nonlocal taken
            await asyncio.sleep(max(0.0, window.start - time.monotonic()))
            while (t0 := time.monotonic()) < window.end:
                request = requests[taken % len(requests)]
                if taken >= len(requests):
                    out.reused += 1
                taken += 1
                try:
                    await call(request, timeout=120)
                except grpc.aio.AioRpcError as exc:
                    out.error(exc)
                    await asyncio.sleep(RETRY_PAUSE_S)
                    continue
                t1 = time.monotonic()
                if window.inside(t1):
                    out.calls += 1
                    out.records += task.batch
                    out.latencies_ms.append((t1 - t0) * 1000)

        await asyncio.gather(*(lane() for _ in range(task.threads)))
    return out


async def _raw_stream_async(task: Task, window: Window, requests: list[bytes]) -> Outcome:
    """One StreamAppend of pre-encoded messages, sent as fast as flow control allows until the
    window ends; acks decoded (they are few) and timed per message."""
    out = Outcome()
    sent: list[float] = []
    async with grpc.aio.insecure_channel(task.address) as channel:
        method = "/ledger.v1.LedgerService/StreamAppend"
        open_stream = channel.stream_stream(method, None, pb.StreamAppendAck.FromString)
        await channel.channel_ready()

        async def messages() -> AsyncIterator[bytes]:
            await asyncio.sleep(max(0.0, window.start - time.monotonic()))
            k = 0
            while (now := time.monotonic()) < window.end:
                sent.append(now)
                if k >= len(requests):
                    out.reused += 1
                yield requests[k % len(requests)]
                k += 1

        try:
            async for ack in open_stream(messages(), timeout=window.end - time.monotonic() + 120):
                now = time.monotonic()
                if window.inside(now):
                    out.calls += 1
                    out.records += ack.count
                    first = ack.first_position // task.batch
                    last = (ack.first_position + ack.count) // task.batch
                    out.extra_ms.extend((now - t) * 1000 for t in sent[first:last])
        except grpc.aio.AioRpcError as exc:  # the stream ends: what was acked until then counts
            out.error(exc)
    return out


def _raw(task: Task, remote: RemoteLog, window: Window, prepared: Any) -> Outcome:
    if task.rpc == "StreamAppend":
        return asyncio.run(_raw_stream_async(task, window, prepared))
    return asyncio.run(_raw_async(task, window, prepared))


# --- proofs -----------------------------------------------------------------------------------


def _head(task: Task) -> Head:
    return Head(task.head_size, task.head_root)


def _inclusion(task: Task, remote: RemoteLog, window: Window) -> Outcome:
    samples: list[tuple[InclusionProof, int]] = []

    def call(rng: random.Random) -> int:
        size = rng.randint(1, task.head_size)
        index = rng.randrange(size)
        proof = remote.inclusion_proof(index=index, tree_size=size)
        if len(samples) < task.validate:
            samples.append((proof, index))
        return 1

    out = _timed(task, window, call)
    tally = Tally()
    for proof, index in samples:
        tally.record(check_inclusion(remote, _head(task), proof, index))
    return _with_tally(out, tally)


def _inclusions(task: Task, remote: RemoteLog, window: Window) -> Outcome:
    samples: list[tuple[InclusionProof, int]] = []

    def call(rng: random.Random) -> int:
        size = rng.randint(1, task.head_size)
        indexes = [rng.randrange(size) for _ in range(task.batch)]
        proofs = remote.inclusion_proofs(indexes, tree_size=size)
        if len(samples) < task.validate:
            samples.extend(list(zip(proofs, indexes, strict=True))[:4])
        return len(proofs)

    out = _timed(task, window, call)
    tally = Tally()
    for proof, index in samples:
        tally.record(check_inclusion(remote, _head(task), proof, index))
    return _with_tally(out, tally)


def _consistency(task: Task, remote: RemoteLog, window: Window) -> Outcome:
    samples: list[ConsistencyProof] = []

    def call(rng: random.Random) -> int:
        size1 = rng.randint(1, task.head_size)
        size2 = rng.randint(size1, task.head_size)
        proof = remote.consistency_proof(size1, size2)
        if len(samples) < task.validate:
            samples.append(proof)
        return 1

    out = _timed(task, window, call)
    tally = Tally()
    for proof in samples:
        tally.record(check_consistency(remote, _head(task), proof))
    return _with_tally(out, tally)


def _with_tally(out: Outcome, tally: Tally) -> Outcome:
    out.validated, out.invalid, out.first_invalid = tally.ok, tally.bad, tally.first_failure
    return out


LOADS: dict[str, Callable[..., Outcome]] = {
    "append": _append,
    "health": _health,
    "fill": _fill,
    "stream": _stream,
    "probe": _probe,
    "inclusion": _inclusion,
    "inclusions": _inclusions,
    "consistency": _consistency,
    "tiles": lambda task, remote, window: tiles_load(task, window),
}


def prepare_task(task: Task) -> Any:
    """What ``task`` needs ready before the start (the raw load's encoded requests)."""
    if task.kind == "raw":
        return raw_requests(task.rpc, task.batch, task.requests)
    return None


def run_task(task: Task, remote: RemoteLog, window: Window, prepared: Any = None) -> Outcome:
    """Run the load ``task.kind`` names."""
    if task.kind == "raw":
        return _raw(task, remote, window, prepared)
    return LOADS[task.kind](task, remote, window)
