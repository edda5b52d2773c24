"""SeaweedFS for the object-store tests: ``tools/seaweed.py`` started either once for the whole
session (``shared_seaweedfs``: most tests, each on a fresh bucket of its own made by
``fresh_bucket`` and deleted after it) or per test through ``tests/processes.py``
(``run_seaweedfs``: the tests that stop or kill the store, so the process dies with its test),
and a log over an in-memory store to publish.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests import processes
from tests.waits import wait_until
from tools import seaweed as tools_seaweed
from tools.seaweed import ACCESS_KEY, SECRET_KEY, aws_env, find_weed

if TYPE_CHECKING:
    from ledger.core.checkpoint import Ed25519Signer
    from ledger.core.types import PublishedCheckpoint
    from ledger.objstore.bucket import BucketAddress
    from ledger.objstore.publisher import BucketPublisher

__all__ = [
    "ACCESS_KEY",
    "SECRET_KEY",
    "MemoryLog",
    "Seaweed",
    "aws_env",
    "delete_bucket",
    "ensure_bucket",
    "find_weed",
    "fresh_bucket",
    "run_seaweedfs",
    "shared_seaweedfs",
]


class MemoryLog:
    """A log over an in-memory store, grown and published on demand (publisher tests)."""

    def __init__(
        self, origin: str = "ledger.test/bucket", signer: Ed25519Signer | None = None
    ) -> None:
        from ledger.core.checkpoint import Ed25519Signer
        from ledger.log.facade import Log
        from ledger.store.contract import MemoryStore
        from ledger.store.tile_reader import TileReader

        self.origin = origin
        self.store = MemoryStore()
        self.signer = signer or Ed25519Signer.generate(origin)
        self.log = Log(store=self.store, signer=self.signer, origin=origin)
        self.reader = TileReader(store=self.store, published=self.log.latest_checkpoint)

    def grow(self, count: int) -> PublishedCheckpoint:
        """Append ``count`` random digests and publish a checkpoint."""
        from ledger.log.sequencer import AppendItem

        for at in range(0, count, 10_000):
            self.log.append([AppendItem(os.urandom(32)) for _ in range(min(10_000, count - at))])
        return self.log.publish()

    def publisher(self, address: BucketAddress) -> BucketPublisher:
        """A publisher of this log into ``address``."""
        from ledger.objstore.bucket import Bucket
        from ledger.objstore.publisher import BucketPublisher

        return BucketPublisher(
            bucket=Bucket(address),
            reader=self.reader,
            origin=self.origin,
            notes=self.store.get_checkpoint,
            anchors=self.store.get_anchors,
        )


@dataclass(frozen=True, slots=True)
class Seaweed(tools_seaweed.Seaweed):
    """A running SeaweedFS S3 gateway and the test's own bucket on it (``bucket``)."""

    bucket: str = "ledger"

    def address(self, prefix: str) -> BucketAddress:
        """The ``BucketAddress`` of the test's bucket/``prefix`` on this store."""
        from ledger.objstore.bucket import BucketAddress

        return BucketAddress.parse(f"s3://{self.bucket}/{prefix}", endpoint=self.endpoint)

    def bucket_url(self, prefix: str) -> str:
        """The anonymous HTTP read URL of the test's bucket/``prefix`` (ends in ``/``)."""
        return self.public_url(self.bucket, prefix)


@contextmanager
def run_seaweedfs(root: Path) -> Iterator[Seaweed]:
    """``tools.seaweed.run_seaweedfs`` through ``tests/processes.py``: reaped with the test."""
    with tools_seaweed.run_seaweedfs(
        root, spawn=processes.spawn, kill=processes.kill_group
    ) as running:
        yield Seaweed(endpoint=running.endpoint, proc=running.proc)


@contextmanager
def shared_seaweedfs(root: Path) -> Iterator[Seaweed]:
    """``tools.seaweed.run_seaweedfs`` for a session-wide fixture: it outlives each test (not
    reaped after one) and its whole group is killed on exit. Tests on it get their own bucket
    (``fresh_bucket``) and must not stop or kill it (those use ``run_seaweedfs``)."""
    with tools_seaweed.run_seaweedfs(
        root, spawn=processes.spawn_session, kill=processes.kill_group
    ) as running:
        yield Seaweed(endpoint=running.endpoint, proc=running.proc)


_buckets = itertools.count()


@contextmanager
def fresh_bucket(store: Seaweed, test_name: str) -> Iterator[Seaweed]:
    """A new, empty bucket on ``store`` named after the test (unique in this process), ready
    for writes; deleted with its objects on exit (SeaweedFS gives each bucket volumes of its
    own, a few dozen buckets would exhaust ``-volume.max``)."""
    stem = "".join(c if c.isalnum() else "-" for c in test_name.lower()).strip("-")[:40]
    name = f"t{os.getpid()}-{next(_buckets)}-{stem}".rstrip("-")
    ensure_bucket(store, name)
    try:
        yield Seaweed(endpoint=store.endpoint, proc=store.proc, bucket=name)
    finally:
        delete_bucket(store, name)


def ensure_bucket(seaweed: Seaweed, name: str) -> None:
    """Create bucket ``name`` once the volume server joined (credentials from ``aws_env``)."""
    from ledger.core.errors import LedgerError
    from ledger.objstore.bucket import Bucket, BucketAddress

    bucket = Bucket(BucketAddress.parse(f"s3://{name}", endpoint=seaweed.endpoint))

    def ready() -> bool:
        try:
            bucket.ensure_bucket()
            bucket.put(".ledger/probe", b"probe", {})
        except LedgerError:
            return False
        return True

    wait_until(ready, timeout=60, interval=0.2, what="a writable SeaweedFS bucket")


def delete_bucket(seaweed: Seaweed, name: str) -> None:
    """Delete bucket ``name`` with whatever is in it (SeaweedFS allows a non-empty one)."""
    import boto3
    import botocore.config

    config = botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3})
    client: Any = boto3.session.Session().client(
        "s3", endpoint_url=seaweed.endpoint, config=config, **_credentials()
    )
    client.delete_bucket(Bucket=name)


def _credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
        "region_name": "us-east-1",
    }
