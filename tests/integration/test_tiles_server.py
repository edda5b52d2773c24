"""The tlog-tiles read path against a real server (gRPC on port 0, real RocksDB, aiohttp tiles
endpoint, static mirror): proofs built from tiles equal the server's gRPC proofs, the HTTP
answers follow C2SP tlog-tiles, and the mirror holds exactly what the endpoint serves."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import random
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import main as ledger_main
from ledger.core import merkle, tiles
from ledger.core.checkpoint import Ed25519Signer
from ledger_client.cli.main import main as verify_main
from ledger_client.receipts.receipt import Receipt
from ledger_client.remote.log import RemoteLog
from ledger_client.remote.tiles import TileClient
from tests.harness import ServerThread, running_server
from tools.nginx_mirror import find_nginx, run_nginx

pytestmark = pytest.mark.integration


def fill(remote: RemoteLog, count: int, digests: list[bytes] | None = None) -> int:
    """Append ``count`` random digests in batches; return the size of the covering checkpoint."""
    size = 0
    for at in range(0, count, 10_000):
        batch = [os.urandom(32) for _ in range(min(10_000, count - at))]
        size = remote.append(batch).results[-1].index + 1
        if digests is not None:
            digests += batch
    deadline = time.monotonic() + 30
    while remote.checkpoint().size < size:
        assert time.monotonic() < deadline, "no checkpoint covered the appends"
        time.sleep(0.01)
    return remote.checkpoint().size


class Log:
    """A filled server, the sizes it published and its mirror folder."""

    def __init__(
        self, server: ServerThread, remote: RemoteLog, signer: Ed25519Signer, root: Path
    ) -> None:
        self.server, self.remote, self.signer, self.root = server, remote, signer, root
        self.sizes: list[int] = []
        self.digests: list[bytes] = []

    @property
    def url(self) -> str:
        url = self.server.app.tiles_url
        assert url is not None
        return url

    @property
    def mirror(self) -> Path:
        return self.root / "mirror"

    def append(self, count: int) -> int:
        self.sizes.append(fill(self.remote, count, self.digests))
        return self.sizes[-1]

    def wait_for_mirror(self, size: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            path = self.mirror / "checkpoint"
            if path.exists() and path.read_text().split("\n")[1] == str(size):
                return
            time.sleep(0.02)
        raise AssertionError(f"the mirror did not reach size {size}")


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Log]:
    root = tmp_path_factory.mktemp("tiles")
    with running_server(root / "data", tiles_dir=root / "mirror") as (server, remote, signer):
        filled = Log(server, remote, signer, root)
        rng = random.Random(11)
        for count in (1, 255, 1, 3000, 40_000, 27_000, 300):  # > 65,536: level-2 tiles
            filled.append(count + rng.randrange(7))
        filled.wait_for_mirror(filled.sizes[-1])
        yield filled


def _get(url: str, path: str, method: str = "GET") -> http.client.HTTPResponse:
    """A raw request (no client-side path normalisation)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    conn.request(method, path)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def _body(url: str, path: str) -> tuple[int, bytes, dict[str, str]]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data, {k.lower(): v for k, v in response.getheaders()}


# --- proofs from tiles equal the server's ------------------------------------------------------


def test_proofs_from_tiles_equal_grpc_proofs(log: Log) -> None:
    client = TileClient(log.url)
    latest = log.sizes[-1]
    assert latest > 65_536
    rng = random.Random(5)
    sizes = [*log.sizes, 1, 2, 256, 257, 65_535, 65_536, 65_537, latest]
    sizes += [rng.randint(1, latest) for _ in range(60)]
    for size in sizes:
        cp_root = client.root(size)
        indexes = sorted({0, size - 1, *(rng.randrange(size) for _ in range(5))})
        served = log.remote.inclusion_proofs(indexes, tree_size=size)
        for index, proof in zip(indexes, served, strict=True):
            assert client.inclusion_proof(index, size) == list(proof.hashes), (index, size)
            merkle.verify_inclusion(proof.leaf_hash, index, size, proof.hashes, cp_root)
        size1 = rng.randint(1, size)
        assert client.consistency_proof(size1, size) == list(
            log.remote.consistency_proof(size1, size).hashes
        ), (size1, size)
    for size in log.sizes:  # the roots the log signed
        assert client.root(size) == log.remote.checkpoint(size).root_hash


def test_entry_bundles_hold_the_leaves(log: Log) -> None:
    client = TileClient(log.url)
    size = log.sizes[-1]
    for start in (0, 255, 256, 65_530, size - 3):
        entries = log.remote.entries(start, 3)
        assert client.leaves(start, 3, size) == [e.leaf for e in entries]


# --- the HTTP endpoint -------------------------------------------------------------------------


def test_checkpoint_response(log: Log) -> None:
    status, data, headers = _body(log.url, "/checkpoint")
    assert status == 200
    assert data.decode() == log.remote.checkpoint().note
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["cache-control"] == "public, max-age=1"
    assert int(headers["content-length"]) == len(data)


def test_tile_responses(log: Log) -> None:
    size = log.sizes[-1]
    status, data, headers = _body(log.url, "/tile/0/000")
    assert status == 200 and len(data) == 8192
    assert headers["content-type"] == "application/octet-stream"
    assert headers["cache-control"] == "public, max-age=31536000, immutable"
    assert headers["content-length"] == "8192"
    head = _get(log.url, "/tile/0/000", "HEAD")
    assert head.status == 200 and head.getheader("Content-Length") == "8192"
    for tile in tiles.tiles_for_size(size):
        status, data, _ = _body(log.url, "/" + tile.path)
        assert status == 200, tile.path
        if not tile.entries:
            assert len(data) == 32 * tile.width


def test_partial_tiles_of_every_published_size_stay(log: Log) -> None:
    for size in log.sizes:
        for tile in tiles.tiles_for_size(size):
            status, data, _ = _body(log.url, "/" + tile.path)
            assert status == 200, (size, tile.path)
    # a partial width of a tile that is full now: the full tile cut to width, never a 400
    status, data, _ = _body(log.url, "/tile/0/000.p/7")
    full = _body(log.url, "/tile/0/000")[1]
    assert status == 200 and data == full[: 7 * 32]
    status, data, headers = _body(log.url, "/tile/entries/000.p/2")
    assert headers["content-encoding"] == "gzip"  # C2SP tlog-tiles: without negotiation
    assert status == 200 and tiles.decode_entry_bundle(gzip.decompress(data), 2) == [
        e.leaf for e in log.remote.entries(0, 2)
    ]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/tile/0/x999/999", 404),  # beyond the tree
        ("GET", "/tile/5/000", 404),
        ("GET", "/tile/entries/x001/000", 404),
        ("GET", "/tile/0/0000", 400),
        ("GET", "/tile/0/x000/001", 400),
        ("GET", "/tile/0/000.p/0", 400),
        ("GET", "/tile/0/000.p/256", 400),
        ("GET", "/tile/64/000", 400),
        ("GET", "/tile/0/000/junk", 400),
        ("GET", "/tile/../checkpoint", 400),
        ("GET", "/tile/0/..%2F..%2Fetc%2Fpasswd", 400),
        ("GET", "/../../etc/passwd", 404),
        ("GET", "/", 404),
        ("GET", "/checkpoint/x", 404),
        ("POST", "/checkpoint", 405),
        ("DELETE", "/tile/0/000", 405),
        ("PUT", "/tile/0/000", 405),
    ],
)
def test_refusals(log: Log, method: str, path: str, status: int) -> None:
    parts = urllib.parse.urlsplit(log.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    conn.request(method, path)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    assert response.status == status
    assert response.getheader("Content-Type", "").startswith("text/plain")
    assert body.strip()


def test_nothing_past_the_published_size(log: Log) -> None:
    size = log.sizes[-1]
    width = size % 256
    assert _body(log.url, f"/tile/0/{tiles.format_index(size // 256)}.p/{width}")[0] == 200
    if width < 255:
        path = f"/tile/0/{tiles.format_index(size // 256)}.p/{width + 1}"
        assert _body(log.url, path)[0] == 404


# --- the static mirror -------------------------------------------------------------------------


def _mirror_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def test_mirror_holds_what_the_endpoint_serves(log: Log) -> None:
    files = _mirror_files(log.mirror)
    assert files.pop("checkpoint").decode() == log.remote.checkpoint().note
    expected: set[str] = set()
    for size in log.sizes:
        expected |= {t.path for t in tiles.tiles_for_size(size)}
    assert expected <= set(files)  # every published size's tiles, partial ones kept
    for path in sorted(expected)[:: max(1, len(expected) // 200)]:
        served = _body(log.url, "/" + path)[1]
        if path.startswith("tile/entries/"):  # sent gzip-encoded: the .gz twin, byte for byte
            assert files[path + ".gz"] == served, path
            served = gzip.decompress(served)
        assert files[path] == served, path
    assert not list(log.mirror.rglob(".*.tmp"))


def test_mirror_read_as_files(log: Log) -> None:
    client = TileClient(log.mirror.as_uri())
    checkpoint = client.checkpoint([log.signer.verifier()])
    size = checkpoint.checkpoint.size
    assert client.root(size) == checkpoint.checkpoint.root_hash
    leaf = client.leaves(size - 1, 1, size)[0]
    client.verify_inclusion(leaf, size - 1, size, checkpoint.checkpoint.root_hash)


# --- ledger-verify over tiles ------------------------------------------------------------------


def test_monitor_over_tiles(log: Log, tmp_path: Path) -> None:
    key = log.signer.verifier().key_string()
    state = tmp_path / "state.json"
    args = ["monitor", "--tiles", log.url, "--key", key, "--state", str(state), "--once"]
    first = CliRunner().invoke(verify_main, [*args, "--full-audit", "--json"])
    assert first.exit_code == 0, first.output
    log.append(1_000)
    again = CliRunner().invoke(verify_main, [*args, "--json", "--full-audit"])
    assert again.exit_code == 0, again.output
    assert f'"size": {log.sizes[-1]}' in again.output
    log.wait_for_mirror(log.sizes[-1])
    mirrored = CliRunner().invoke(
        verify_main, ["monitor", "--tiles", log.mirror.as_uri(), "--key", key,
                      "--state", str(state), "--once"],
    )  # fmt: skip
    assert mirrored.exit_code == 0, mirrored.output
    both = CliRunner().invoke(verify_main, [*args, "--server", "127.0.0.1:1"])
    assert both.exit_code == 2 and "exactly one" in both.output


def test_receipts_over_tiles(log: Log, tmp_path: Path) -> None:
    key = log.signer.verifier().key_string()
    index = 70_001
    digest = log.digests[index]
    out = tmp_path / "receipt.json"
    fetched = CliRunner().invoke(
        verify_main, ["receipt-fetch", "--tiles", log.url, "--digest", digest.hex(),
                      "--key", key, "--out", str(out)],
    )  # fmt: skip
    assert fetched.exit_code == 0, fetched.output
    receipt = Receipt.from_json(out.read_text())
    assert receipt.index == index and receipt.tree_size == log.sizes[-1]
    checked = CliRunner().invoke(verify_main, ["receipt", str(out), "--key", key])
    assert checked.exit_code == 0, checked.output
    log.append(300)
    upgraded = tmp_path / "upgraded.json"
    moved = CliRunner().invoke(
        verify_main, ["receipt-upgrade", str(out), "--tiles", log.url, "--key", key,
                      "--out", str(upgraded)],
    )  # fmt: skip
    assert moved.exit_code == 0, moved.output
    new = Receipt.from_json(upgraded.read_text())
    assert new.tree_size == log.sizes[-1] and new.previous is not None
    assert CliRunner().invoke(verify_main, ["receipt", str(upgraded), "--key", key]).exit_code == 0
    # a run file (JSON lines of {record, receipt}): every receipt moved, the file replaced
    run_file = tmp_path / "run.jsonl"
    item = json.dumps({"record": None, "receipt": receipt.to_json_obj()})
    run_file.write_text(f"{item}\n{item}\n")
    log.append(10)
    in_place = CliRunner().invoke(
        verify_main, ["receipt-upgrade", str(run_file), "--tiles", log.url, "--key", key,
                      "--out", str(run_file), "--json"],
    )  # fmt: skip
    assert in_place.exit_code == 0, in_place.output
    assert json.loads(in_place.output)["records"] == 2
    lines = [Receipt.from_json_obj(json.loads(line)["receipt"]) for line in run_file.open()]
    assert [(r.tree_size, r.previous is not None) for r in lines] == [(log.sizes[-1], True)] * 2
    wrong_key = Ed25519Signer.generate("other").verifier().key_string()
    bad = CliRunner().invoke(
        verify_main, ["receipt-fetch", "--tiles", log.url, "--digest", digest.hex(),
                      "--index", str(index), "--key", wrong_key, "--out", str(out)],
    )  # fmt: skip
    assert bad.exit_code == 1, bad.output


# --- ledger tiles export -----------------------------------------------------------------------


def test_export_from_a_stopped_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, tiles_listen="off") as (server, remote, signer):
        assert server.app.tiles is None
        fill(remote, 1000)
        size = fill(remote, 70_000)
    out = tmp_path / "export"
    first = CliRunner().invoke(ledger_main, ["tiles", "export", "--data-dir", str(data),
                                             "--out", str(out), "--json"])  # fmt: skip
    assert first.exit_code == 0, first.output
    assert f'"size": {size}' in first.output
    files = _mirror_files(out)
    paths = {t.path for t in tiles.tiles_for_size(size)}
    twins = {p + ".gz" for p in paths if p.startswith("tile/entries/")}
    assert paths | twins | {"checkpoint"} == set(files)
    again = CliRunner().invoke(ledger_main, ["tiles", "export", "--data-dir", str(data),
                                             "--out", str(out), "--json"])  # fmt: skip
    assert again.exit_code == 0 and '"files": 0' in again.output
    client = TileClient(out.as_uri())
    signed = client.checkpoint([signer.verifier()]).checkpoint
    assert signed.size == size and client.root(size) == signed.root_hash
    missing = CliRunner().invoke(ledger_main, ["tiles", "export", "--out", str(out)])
    assert missing.exit_code == 2
    nowhere = tmp_path / "nowhere"
    empty = CliRunner().invoke(ledger_main, ["tiles", "export", "--data-dir", str(nowhere),
                                             "--out", str(out)])  # fmt: skip
    assert empty.exit_code == 2 and "holds no log" in empty.output and not nowhere.exists()


# --- nginx over the mirror, with the README's server block ---------------------------------------


@pytest.fixture(scope="module")
def nginx(log: Log) -> Iterator[str]:
    if find_nginx() is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx-light; .ci/run does)")
    with run_nginx(log.mirror) as url:
        yield url


def test_nginx_serves_the_mirror(log: Log, nginx: str) -> None:
    log.wait_for_mirror(log.remote.checkpoint().size)
    status, note, headers = _body(nginx, "/checkpoint")
    assert status == 200 and note.decode() == log.remote.checkpoint().note
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["cache-control"] == "public, max-age=1"
    status, data, headers = _body(nginx, "/tile/0/000")
    assert status == 200 and data == _body(log.url, "/tile/0/000")[1]
    assert headers["content-type"] == "application/octet-stream"
    assert headers["cache-control"] == "public, max-age=31536000, immutable"
    assert headers["content-length"] == "8192"
    assert _get(nginx, "/tile/0/000", "HEAD").status == 200
    status, data, headers = _body(nginx, "/tile/entries/000")
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert data == _body(log.url, "/tile/entries/000")[1]  # the .gz twin, as the endpoint sends
    assert headers["cache-control"] == "public, max-age=31536000, immutable"
    assert _body(nginx, "/tile/entries/.000.x.tmp")[0] == 404
    for path in ("/tile/0/x999/999", "/tile/9/000", "/", "/../etc/passwd", "/tile/0/.000.x.tmp"):
        status, _, headers = _body(nginx, path)
        assert status in (400, 404), path
        assert "immutable" not in headers.get("cache-control", ""), path


def test_tile_client_over_nginx_matches_grpc(log: Log, nginx: str) -> None:
    client = TileClient(nginx)
    signed = client.checkpoint([log.signer.verifier()]).checkpoint
    size = signed.size
    assert client.root(size) == signed.root_hash
    rng = random.Random(3)
    for _ in range(30):
        index = rng.randrange(size)
        (served,) = log.remote.inclusion_proofs([index], tree_size=size)
        assert client.verify_inclusion(served.entry.leaf, index, size, signed.root_hash) == list(
            served.hashes
        )
    for size1 in log.sizes:
        if size1 <= size:
            assert client.consistency_proof(size1, size) == list(
                log.remote.consistency_proof(size1, size).hashes
            )
