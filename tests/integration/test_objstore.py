"""The object-store publisher against a real SeaweedFS (``weed server -s3`` on loopback): the
exact C2SP tlog-tiles layout, read back anonymously over HTTP by the project's tile client and
monitor; create-only retries and conflicts; the conditional-write race check."""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import os
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ledger.api.tls import make_dev_certs
from ledger.core import tiles
from ledger.core.errors import (
    NonConformingStoreError,
    ObjectConflictError,
    StorageError,
    StoreUnreachableError,
)
from ledger.core.types import Anchor
from ledger.objstore.bucket import Bucket, BucketAddress
from ledger.objstore.conformance import check_store
from ledger.objstore.publisher import CHECKPOINT_CACHE, TILE_CACHE, BucketPublisher
from ledger_client.remote.tiles import TileClient
from tests.objstore_world import MemoryLog, Seaweed

pytestmark = pytest.mark.integration
ORIGIN = "ledger.test/bucket"


def _address(seaweed: Seaweed, prefix: str = "logs/one") -> BucketAddress:
    return seaweed.address(prefix)


def _publisher(seaweed: Seaweed, log: MemoryLog, prefix: str = "logs/one") -> BucketPublisher:
    return log.publisher(seaweed.address(prefix))


def _head(url: str) -> dict[str, str]:
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD")) as response:
        return {k.lower(): v for k, v in response.headers.items()}


def test_publisher_writes_the_c2sp_layout_readable_anonymously(seaweed: Seaweed) -> None:
    check_store(_address(seaweed), rounds=1, writers=8)
    log = MemoryLog(ORIGIN)
    publisher = _publisher(seaweed, log)
    sizes = []
    for count in (5, 300, 1, 1000):
        cp = log.grow(count)
        sizes.append(cp.size)
        done = publisher.update([cp])
        assert done.size == cp.size and done.existing == 0
    base = seaweed.bucket_url("logs/one")
    client = TileClient(base)
    verified = client.checkpoint([log.signer.verifier()], origin=ORIGIN)
    assert verified.checkpoint.size == cp.size
    for size in sizes:  # every published size's tree is there (partial tiles kept)
        assert client.root(size) == log.log.root_at(size)
    assert client.leaves(0, cp.size, cp.size) == log.store.get_leaves(range(cp.size))
    assert _head(base + "checkpoint")["cache-control"] == CHECKPOINT_CACHE
    tile = _head(base + "tile/0/000")
    assert tile["cache-control"] == TILE_CACHE
    bundle = _head(base + "tile/entries/000")
    assert bundle["content-encoding"] == "gzip" and bundle["cache-control"] == TILE_CACHE
    with urllib.request.urlopen(base + f"checkpoints/{sizes[0]}") as response:
        assert response.read().decode() == log.store.get_checkpoint(sizes[0]).note  # type: ignore[union-attr]
    again = _publisher(seaweed, log)  # a restart resumes from the bucket's checkpoint
    assert again.published_size() == cp.size
    assert again.update([cp]).created == 0


def test_create_only_retry_with_other_gzip_bytes_is_fine(seaweed: Seaweed) -> None:
    check_store(_address(seaweed, "logs/two"), rounds=1, writers=8)
    log = MemoryLog(ORIGIN)
    cp = log.grow(7)
    bucket = Bucket(_address(seaweed, "logs/two"))
    data = log.reader.read(tiles.TileID(level=0, index=0, width=7, entries=True))
    other = gzip.compress(data, compresslevel=1, mtime=12345)  # another zlib's bytes, same content
    assert other != tiles.gzip_bundle(data)
    assert bucket.create("tile/entries/000.p/7", other, {"Content-Encoding": "gzip"})
    done = _publisher(seaweed, log, "logs/two").update([cp])
    assert done.size == 7 and done.existing == 1
    client = TileClient(seaweed.bucket_url("logs/two"))
    assert client.leaves(0, 7, 7) == log.store.get_leaves(range(7))


def test_create_only_conflict_stops_publishing(seaweed: Seaweed) -> None:
    check_store(_address(seaweed, "logs/three"), rounds=1, writers=8)
    log = MemoryLog(ORIGIN)
    cp = log.grow(9)
    bucket = Bucket(_address(seaweed, "logs/three"))
    assert bucket.create("tile/0/000.p/9", os.urandom(9 * 32), {})  # another history
    publisher = _publisher(seaweed, log, "logs/three")
    with pytest.raises(ObjectConflictError, match="other content"):
        publisher.update([cp])
    assert bucket.get("checkpoint") is None  # the checkpoint is never written over a conflict
    with pytest.raises(ObjectConflictError):  # and publishing stays stopped
        publisher.update([log.grow(1)])


def test_an_unchecked_store_is_refused(seaweed: Seaweed) -> None:
    publisher = _publisher(seaweed, MemoryLog(ORIGIN), "logs/unchecked")
    with pytest.raises(NonConformingStoreError, match="ledger objstore check"):
        publisher.require_conforming()


@pytest.mark.slow
def test_conditional_writes_have_one_winner_under_contention(seaweed: Seaweed) -> None:
    """64 concurrent conditional PUTs on one key: exactly one winner per round, 5 rounds of
    create-only and 5 of compare-and-swap (``ledger objstore check`` runs 50 by default)."""
    report = check_store(_address(seaweed, "conformance"), rounds=5, writers=64)
    assert [r.mode for r in report.rounds].count("create") == 5
    assert [r.mode for r in report.rounds].count("swap") == 5
    assert report.passed, report.detail()
    assert all(r.winners == 1 and r.losers == 63 for r in report.rounds)
    _publisher(seaweed, MemoryLog(ORIGIN), "conformance").require_conforming()


def test_a_bucket_with_another_root_is_refused(seaweed: Seaweed) -> None:
    check_store(_address(seaweed, "logs/fork"), rounds=1, writers=8)
    first = MemoryLog(ORIGIN)
    first.publisher(_address(seaweed, "logs/fork")).update([first.grow(30)])
    other = MemoryLog(ORIGIN, first.signer)  # same log name and key, another history
    other.grow(30)
    cp = other.grow(20)
    with pytest.raises(ObjectConflictError, match="another history"):
        other.publisher(_address(seaweed, "logs/fork")).update([cp])


def test_coalesced_update_skips_intermediate_partial_tiles(seaweed: Seaweed) -> None:
    """The mirror's sweep: only the newest pending checkpoint gets partial tiles; every note is
    published; a size anchored later gets its own partial tiles before its anchors."""
    check_store(_address(seaweed, "logs/coalesce"), rounds=1, writers=8)
    log = MemoryLog(ORIGIN)
    publisher = _publisher(seaweed, log, "logs/coalesce")
    first, middle, last = log.grow(10), log.grow(20), log.grow(5)
    done = publisher.update([first, middle, last], coalesce=True)
    assert done.size == last.size
    base = seaweed.bucket_url("logs/coalesce")
    bucket = Bucket(_address(seaweed, "logs/coalesce"))
    assert bucket.get("tile/0/000.p/35") is not None
    assert bucket.get("tile/0/000.p/10") is None and bucket.get("tile/entries/000.p/30") is None
    for cp in (first, middle, last):  # every checkpoint's note is there
        with urllib.request.urlopen(base + f"checkpoints/{cp.size}") as response:
            assert response.read().decode() == cp.note
    client = TileClient(base)
    assert client.checkpoint([log.signer.verifier()], origin=ORIGIN).checkpoint.size == 35
    assert client.root(35) == log.log.root_at(35)
    log.store.put_anchor(Anchor(size=10, tsa="tsa.test", token=b"opaque", gen_time_ms=1))
    assert publisher.publish_anchors([10]) == 1
    assert bucket.get("tile/0/000.p/10") is not None
    assert bucket.get("tile/entries/000.p/10") is not None
    assert TileClient(base).root(10) == log.log.root_at(10)


def test_a_failed_sweep_leaves_its_partial_tiles_to_be_written_before_anchors(
    seaweed: Seaweed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A coalesced sweep whose tile uploads fail (the bucket refuses a PUT once: a transient
    fault) has not put its tree's partial tiles in the bucket, so anchoring that size later
    must write them first, even after a newer sweep covered a bigger tree."""
    check_store(_address(seaweed, "logs/edge-fault"), rounds=1, writers=8)
    log = MemoryLog(ORIGIN)
    publisher = _publisher(seaweed, log, "logs/edge-fault")
    bucket = Bucket(_address(seaweed, "logs/edge-fault"))
    first = log.grow(10)
    create = publisher.bucket.create
    refused: list[str] = []

    def flaky(name: str, body: bytes, headers: dict[str, str]) -> bool:
        if name.startswith("tile/") and not refused:
            refused.append(name)
            raise StorageError(f"{name}: injected transient fault")
        return create(name, body, headers)

    monkeypatch.setattr(publisher.bucket, "create", flaky)
    with pytest.raises(StorageError, match="injected"):
        publisher.update([first], coalesce=True)
    assert refused and bucket.get("checkpoint") is None
    later = log.grow(300)
    assert publisher.update([later], coalesce=True).size == 310
    log.store.put_anchor(Anchor(size=10, tsa="tsa.test", token=b"opaque", gen_time_ms=1))
    assert publisher.publish_anchors([10]) == 1
    for name in ("tile/0/000.p/10", "tile/entries/000.p/10"):
        assert bucket.get(name) is not None, f"{name} missing under anchors/10"
    assert TileClient(seaweed.bucket_url("logs/edge-fault")).root(10) == log.log.root_at(10)
    publisher.close()


@contextmanager
def _tls_relay(target: tuple[str, int], cert: Path, key: Path) -> Iterator[int]:
    """A TLS front for the store (as a private-CA endpoint is): each accepted TLS connection is
    relayed byte for byte to ``target``. Yields its port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            raw.settimeout(None)
            try:
                front = context.wrap_socket(raw, server_side=True)
            except OSError:  # a client that refused our certificate
                raw.close()
                continue
            back = socket.create_connection(target)
            for a, b in ((front, back), (back, front)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_an_https_store_with_a_private_ca_is_trusted_through_aws_ca_bundle(
    seaweed: Seaweed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PUTs (the kept-open connections) and GETs (botocore) both verify the store's certificate
    against the bundle ``AWS_CA_BUNDLE`` names; without it the private CA is refused."""
    certs = make_dev_certs(
        tmp_path / "tls", hosts=["127.0.0.1"], clients=[], now=dt.datetime.now(dt.UTC)
    )
    plain = urlsplit(seaweed.endpoint)
    with _tls_relay(
        (plain.hostname or "", plain.port or 80), certs.server_cert, certs.server_key
    ) as port:
        address = BucketAddress.parse(
            f"s3://{seaweed.bucket}/logs/private-ca", endpoint=f"https://127.0.0.1:{port}"
        )
        monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
        with pytest.raises((StorageError, StoreUnreachableError), match="CERTIFICATE_VERIFY"):
            Bucket(address, attempts=1).create("tls-probe", b"x", {})
        monkeypatch.setenv("AWS_CA_BUNDLE", str(certs.ca))
        bucket = Bucket(address, attempts=1)
        assert bucket.create("tls-probe", b"over tls", {})
        stored = bucket.get("tls-probe")
        assert stored is not None and stored.body == b"over tls"
        assert bucket.swap("tls-probe", b"swapped", stored.etag, {}) is not None
        again = bucket.get("tls-probe")
        assert again is not None and again.body == b"swapped"
