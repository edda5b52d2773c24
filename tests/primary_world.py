"""Primary mode with real processes: ``ledger serve`` writers (active and ``--standby``, each
with its own data dir) over one SeaweedFS bucket, an append load that records what was
acknowledged, and the checks of the takeover tests."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ledger.core.checkpoint import Ed25519Signer, open_checkpoint
from ledger.core.errors import LedgerError
from ledger.fileio.keys import write_signer
from ledger.objstore.bucket import Bucket, BucketAddress
from ledger.objstore.conformance import check_store
from ledger.objstore.primary import LOCK_KEY, LockState
from ledger_client.remote.log import RemoteLog, status_name
from tests.harness import ORIGIN, ServerProcess
from tests.objstore_world import Seaweed
from tests.waits import wait_until

__all__ = ["Load", "Pair", "bucket_root_at", "wait_acked"]

LEASE_S = 2.0


class Pair:
    """Writers over one bucket prefix (``start`` an active one, ``standby`` another)."""

    def __init__(self, seaweed: Seaweed, root: Path, prefix: str) -> None:
        self.seaweed = seaweed
        self.root = root
        self.prefix = prefix
        self.address: BucketAddress = seaweed.address(prefix)
        check_store(self.address, rounds=1, writers=4)
        self.bucket = Bucket(self.address)
        self.key = root / "signer.key"
        self.signer = Ed25519Signer.generate(ORIGIN)
        write_signer(self.key, self.signer)
        self._pool = ThreadPoolExecutor(2)

    def args(self, writer: str) -> list[str]:
        """``ledger serve`` flags of a primary-mode writer named ``writer`` on this bucket."""
        return self._args(writer)

    def _args(self, writer: str) -> list[str]:
        return [
            "--object-store-url", f"s3://{self.seaweed.bucket}/{self.prefix}",
            "--object-store-endpoint", self.seaweed.endpoint,
            "--object-store-mode", "primary", "--object-store-writer", writer,
            "--checkpoint-interval-ms", "20",
        ]  # fmt: skip

    def start(self, name: str) -> ServerProcess:
        os.environ.setdefault("LEDGER_OBJECT_STORE_LEASE_S", str(LEASE_S))
        return ServerProcess(self.root / name, self.key, *self._args(name))

    def standby(self, name: str) -> Future[ServerProcess]:
        """A ``--standby`` writer: its ready line (the future's result) comes at the takeover."""
        os.environ.setdefault("LEDGER_OBJECT_STORE_LEASE_S", str(LEASE_S))
        return self._pool.submit(
            ServerProcess, self.root / name, self.key, *self._args(name), "--standby"
        )

    def submit(self, fn: Callable[..., ServerProcess], *args: object) -> Future[ServerProcess]:
        """``fn(*args)`` on a thread (a standby's ready line comes only at the takeover)."""
        return self._pool.submit(fn, *args)

    def bucket_checkpoint(self) -> tuple[int, bytes]:
        """The bucket's durable checkpoint (the lock's: what acknowledgements wait for), once
        the public ``checkpoint`` has caught up with it (the public copy follows the swap)."""
        lock = self.bucket.get(LOCK_KEY)
        assert lock is not None
        state = LockState.decode(lock.body)

        def public_size() -> bool | None:
            stored = self.bucket.get("checkpoint")
            size = 0 if stored is None else int(stored.body.split(b"\n")[1])
            return True if size >= state.size else None

        wait_until(public_size, timeout=30, what="the public checkpoint to reach the lock's")
        cp = open_checkpoint(state.note, [self.signer.verifier()], origin=ORIGIN)
        return cp.checkpoint.size, cp.checkpoint.root_hash

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def bucket_root_at(pair: Pair, size: int) -> bytes | None:
    """The root the bucket's ``checkpoints/<size>`` states (None: no checkpoint of that size)."""
    stored = pair.bucket.get(f"checkpoints/{size}")
    if stored is None:
        return None
    cp = open_checkpoint(stored.body.decode(), [pair.signer.verifier()], origin=ORIGIN)
    return cp.checkpoint.root_hash


class Load:
    """Appends of 8 random digests in a loop to the address given; records every acknowledged
    (digest, index); errors only counted (the client retries elsewhere)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.acked: dict[bytes, int] = {}
        self.errors = 0
        self.last_error = ""
        self.statuses: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        client = RemoteLog(self.address, timeout=5)
        try:
            while not self._stop.is_set():
                digests = [os.urandom(32) for _ in range(8)]
                try:
                    out = client.append(digests)
                except LedgerError as exc:
                    self.errors += 1
                    self.last_error = str(exc)
                    self.statuses.add(status_name(exc))
                    self._stop.wait(0.05)
                    continue
                for digest, result in zip(digests, out.results, strict=True):
                    self.acked[digest] = result.index
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def wait_acked(load: Load, count: int, timeout: float = 60) -> None:
    """Until ``count`` digests are acknowledged."""
    wait_until(lambda: len(load.acked) >= count, timeout=timeout, interval=0.05,
               what=f"{count} acknowledged appends")  # fmt: skip
