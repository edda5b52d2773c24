"""Streams and memory over real gRPC: a malformed message ends the stream with INVALID_ARGUMENT
after the acknowledgements of what was committed; streams never hang; idle streams are closed;
one byte budget refuses requests beyond it; gRPC core refuses oversized messages."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from ledger.api.streams import LINGER_ITEMS
from ledger.v1 import ledger_pb2 as pb
from tests.harness import running_server

pytestmark = [pytest.mark.integration]

METHOD = "/ledger.v1.LedgerService/"


def message(tag: str, n: int = 3) -> bytes:
    items = [
        pb.AppendItem(record_digest=hashlib.sha256(f"{tag}-{i}".encode()).digest())
        for i in range(n)
    ]
    return pb.StreamAppendRequest(items=items).SerializeToString()


def stream(
    address: str,
    messages: Iterator[bytes],
    timeout: float = 20,
    on_ack: Callable[[Any], object] | None = None,
) -> tuple[list[Any], Any]:
    """Run a raw StreamAppend (``on_ack`` called on each ack); (acks, the RpcError or None)."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            METHOD + "StreamAppend",
            request_serializer=None,
            response_deserializer=pb.StreamAppendAck.FromString,
        )
        acks = []
        try:
            for ack in call(messages, timeout=timeout):
                acks.append(ack)
                if on_ack is not None:
                    on_ack(ack)
        except grpc.RpcError as exc:
            return acks, exc
        return acks, None


def test_a_malformed_message_ends_the_stream_after_acking_what_was_committed(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "data") as (server, remote, _):
        for attempt in range(20):  # "in 6 of 60 tries the stream never ends": never again

            def messages(attempt: int = attempt) -> Iterator[bytes]:
                yield message(f"ok-{attempt}")
                time.sleep(0.02 * (attempt % 3))
                yield b"\xff\xff not a protobuf message"

            started = time.monotonic()
            acks, error = stream(server.address, messages())
            assert time.monotonic() - started < 10
            assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "every item before it is acknowledged" in error.details()
            assert sum(a.count for a in acks) == 3  # the valid message was logged and acked
        digest = hashlib.sha256(b"ok-19-0").digest()
        assert remote.append([digest]).results[0].duplicate


def test_an_invalid_item_ends_the_stream_with_invalid_argument(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (server, _, _):
        bad = pb.StreamAppendRequest(items=[pb.AppendItem(record_digest=b"short")])
        acks, error = stream(server.address, iter([message("a"), bad.SerializeToString()]))
        assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "record_digest" in error.details() and sum(a.count for a in acks) == 3


def test_an_idle_stream_is_closed(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", stream_idle_s=0.5) as (server, _, _):

        def messages() -> Iterator[bytes]:
            yield message("idle")
            time.sleep(3)  # holds the stream open, sending nothing

        started = time.monotonic()
        acks, error = stream(server.address, messages())
        assert error is not None and error.code() == grpc.StatusCode.UNAVAILABLE
        assert "idle" in error.details() and sum(a.count for a in acks) == 3
        assert time.monotonic() - started < 2.5


def test_the_byte_budget_and_core_limits_refuse_with_resource_exhausted(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", inflight_mb=1, max_request_mb=4) as (server, _, _):
        big = pb.AppendRecordsRequest(
            items=[pb.AppendItem(record_digest=bytes(32), metadata=b"m" * 1000)] * 1500
        ).SerializeToString()  # ~1.5 MB: within the core limit, beyond the 1 MB budget
        huge = b"\x0a" + b"\x80" * 5 + bytes(5 << 20)  # 5 MB: beyond the core limit
        options = [("grpc.max_send_message_length", 64 << 20)]
        with grpc.insecure_channel(server.address, options=options) as channel:
            append = channel.unary_unary(
                METHOD + "AppendRecords", request_serializer=None, response_deserializer=None
            )
            with pytest.raises(grpc.RpcError) as over_budget:
                append(big, timeout=20)
            assert over_budget.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "in-flight budget" in (over_budget.value.details() or "")
            trailers = over_budget.value.trailing_metadata() or ()
            assert "retry-after-ms" in [m.key for m in trailers]
            with pytest.raises(grpc.RpcError) as too_big:
                append(huge, timeout=20)
            assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        _, error = stream(server.address, iter([big]))
        assert error is not None and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_the_server_wide_call_cap_refuses_beyond_it(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", max_concurrent_rpcs=1) as (server, _, _):
        held, acked = threading.Event(), threading.Event()

        def messages() -> Iterator[bytes]:
            yield message("held")
            held.wait(30)  # the stream stays open: one call in flight

        holder = threading.Thread(
            target=stream, args=(server.address, messages(), 40, lambda _: acked.set())
        )
        holder.start()
        try:
            assert acked.wait(30), "the held stream was never acknowledged"  # now in flight
            with grpc.insecure_channel(server.address) as channel:
                check = channel.unary_unary(
                    METHOD + "GetCheckpoint", request_serializer=None, response_deserializer=None
                )
                with pytest.raises(grpc.RpcError) as refused:
                    check(b"", timeout=10)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        finally:
            held.set()
            holder.join(20)


def _paced_stream(address: str, later: list[bytes]) -> tuple[list[Any], list[float]]:
    """One single-digest message; once it is acknowledged, ``later`` back to back; then the
    half-close after a pause long enough for every acknowledgement. (acks, when each came)."""
    first_acked = threading.Event()
    acked_at: list[float] = []

    def on_ack(_ack: Any) -> None:
        acked_at.append(time.monotonic())
        first_acked.set()

    def messages() -> Iterator[bytes]:
        yield message("linger-first", 1)
        assert first_acked.wait(10)
        yield from later
        time.sleep(1.5)

    acks, error = stream(address, messages(), on_ack=on_ack)
    assert error is None
    return acks, acked_at


def test_a_streams_small_groups_gather_for_the_linger(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", stream_linger_ms=400) as (server, _, _):
        later = [message(f"linger-{i}", 1) for i in range(5)]
        acks, acked_at = _paced_stream(server.address, later)
        # the first message is committed at once; the five sent right after its ack wait for
        # the linger and go in one commit
        assert [a.count for a in acks] == [1, 5]
        assert acked_at[1] - acked_at[0] >= 0.3


def test_a_full_group_does_not_wait_for_the_linger(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", stream_linger_ms=1_000) as (server, _, _):
        acks, acked_at = _paced_stream(server.address, [message("linger-full", LINGER_ITEMS)])
        assert [a.count for a in acks] == [1, LINGER_ITEMS]
        assert acked_at[1] - acked_at[0] < 0.8


def test_without_a_linger_each_message_may_be_committed_alone(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", stream_linger_ms=0) as (server, _, _):
        acks, acked_at = _paced_stream(server.address, [message("nolinger", 1)])
        assert [a.count for a in acks] == [1, 1]
        assert acked_at[1] - acked_at[0] < 0.3
