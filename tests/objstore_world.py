"""SeaweedFS for the object-store tests: ``tools/seaweed.py`` started through
``tests/processes.py`` (so a fixture that uses it is function-scoped and the process dies with
its test), a bucket made ready, and a log over an in-memory store to publish.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

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
    "ensure_bucket",
    "find_weed",
    "run_seaweedfs",
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


class Seaweed(tools_seaweed.Seaweed):
    """A running SeaweedFS S3 gateway, with the tests' bucket addresses."""

    __slots__ = ()

    def address(self, prefix: str, bucket: str = "ledger") -> BucketAddress:
        """The ``BucketAddress`` of ``bucket``/``prefix`` on this store."""
        from ledger.objstore.bucket import BucketAddress

        return BucketAddress.parse(f"s3://{bucket}/{prefix}", endpoint=self.endpoint)


@contextmanager
def run_seaweedfs(root: Path) -> Iterator[Seaweed]:
    """``tools.seaweed.run_seaweedfs`` through ``tests/processes.py``."""
    with tools_seaweed.run_seaweedfs(
        root, spawn=processes.spawn, kill=processes.kill_group
    ) as running:
        yield Seaweed(endpoint=running.endpoint, proc=running.proc)


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
