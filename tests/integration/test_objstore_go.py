"""An independent reader of the bucket: Go's x/mod ``tlog.TileHashReader``.

``tests/go/tlogcheck/main.go`` is built here in GOPATH mode from Debian's golang-go and
golang-golang-x-mod-dev (``.ci/run`` installs both); its TileReader maps x/mod's tile paths,
which carry the height (``tile/8/L/N``), to C2SP's (``tile/L/N``). It reads the bucket
anonymously over HTTP, opens the checkpoint with x/mod's note package and verifies the tree
hash at the signed size, a record proof for every entry and tree proofs from older sizes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ledger.objstore.bucket import Bucket
from ledger.objstore.conformance import check_store
from tests import processes
from tests.objstore_world import MemoryLog, Seaweed

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
XMOD = Path("/usr/share/gocode")  # golang-golang-x-mod-dev


def _user_gocache() -> str:
    """Where ``go`` keeps its build cache by default (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or (
        str(Path.home() / ".cache") if os.environ.get("HOME") else ""
    )
    return str(Path(base) / "go-build") if base else ""


def _build(tmp: Path) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed (Debian: golang-go; .ci/run installs it)")
    if not (XMOD / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        pytest.skip("golang.org/x/mod is not installed (Debian: golang-golang-x-mod-dev)")
    gopath = tmp / "gopath"
    src = gopath / "src" / "tlogcheck"
    src.mkdir(parents=True)
    shutil.copy(ROOT / "tests/go/tlogcheck/main.go", src / "main.go")
    out = tmp / "tlogcheck"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": f"{gopath}:{XMOD}",
        # Go's own build cache (content-addressed, safe to share): x/mod compiles once per
        # machine, not once per run (~40 s on a busy 2-core machine); a temp one without a home.
        "GOCACHE": os.environ.get("GOCACHE") or _user_gocache() or str(tmp / "gocache"),
        "GOFLAGS": "",
        "CGO_ENABLED": "0",
    }
    done = processes.run([go, "build", "-o", str(out), "tlogcheck"], cwd=src, env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def test_go_tile_hash_reader_verifies_the_bucket(seaweed: Seaweed, tmp_path: Path) -> None:
    tlogcheck = _build(tmp_path)
    address = seaweed.address("go")
    check_store(address, rounds=1, writers=8)
    log = MemoryLog("ledger.test/go")
    publisher = log.publisher(address)
    for count in (3, 700, 90):  # full and partial tiles, at level 0 and level 1
        publisher.update([log.grow(count)])
    base = seaweed.bucket_url("go")
    vkey = log.signer.verifier().key_string()
    done = processes.run([tlogcheck, base, vkey], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok 793"
    # the same reader refuses a bucket whose tile was rewritten (it checks, it does not trust)
    Bucket(address).put("tile/0/001", bytes(32 * 256), {})
    bad = processes.run([tlogcheck, base, vkey], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stdout
