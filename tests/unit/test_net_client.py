"""The server side's one outbound HTTP client (``ledger.net.client``): timeouts, the response cap
and the error mapping, against real sockets; and the one-stack rule over ``ledger/``: no
``http.server`` or ``urllib.request``, and aiohttp's client only in ``ledger/net``."""

from __future__ import annotations

import ast
import asyncio
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.core.errors import DeadlineExceededError, RemoteError, UnavailableError
from ledger.net.client import HttpClient, post_blocking
from tests import processes

ROOT = Path(__file__).resolve().parents[2]


def _answer(status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nConnection: close\r\n"
    return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


@pytest.fixture
def canned() -> Iterator[tuple[str, list[bytes]]]:
    """A server answering each connection with the next canned answer (b"" = never answer)."""
    answers: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            answer = answers.pop(0) if answers else b""
            if answer:
                conn.sendall(answer)
                conn.close()
            else:
                held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/x", answers
    listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close() alone does not)
    listener.close()
    for conn in held:
        conn.close()
    thread.join(5)


def test_a_reply_of_any_status_comes_back(canned: tuple[str, list[bytes]]) -> None:
    url, answers = canned
    answers += [_answer(409, b"7\n", "text/x.tlog.size"), _answer(200, b"ok", "Text/Plain")]
    reply = post_blocking(url, b"q", timeout_s=5)
    assert (reply.status, reply.content_type, reply.body) == (409, "text/x.tlog.size", b"7\n")
    assert post_blocking(url, b"q", timeout_s=5).content_type == "text/plain"


def test_a_reply_over_the_cap_is_refused(canned: tuple[str, list[bytes]]) -> None:
    url, answers = canned
    answers += [_answer(200, b"x" * 1001), _answer(200, b"x" * 1000)]
    with pytest.raises(RemoteError, match="over 1000 bytes") as info:
        post_blocking(url, b"q", timeout_s=5, max_bytes=1000)
    assert info.value.status == "HTTP 200" and not info.value.retryable
    assert len(post_blocking(url, b"q", timeout_s=5, max_bytes=1000).body) == 1000


def test_a_silent_server_is_a_deadline(canned: tuple[str, list[bytes]]) -> None:
    url, _ = canned
    with pytest.raises(DeadlineExceededError, match=r"within 0\.3 s"):
        post_blocking(url, b"q", timeout_s=0.3)


def test_a_closed_port_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(UnavailableError, match="unreachable"):
        post_blocking(f"http://127.0.0.1:{port}/", b"q", timeout_s=5)


def test_one_session_on_a_loop_and_blocking_calls_from_a_loop(
    canned: tuple[str, list[bytes]],
) -> None:
    url, answers = canned
    answers += [_answer(200, b"a"), _answer(200, b"b"), _answer(200, b"c")]

    async def main() -> list[bytes]:
        async with HttpClient() as client:
            first = await client.post(url, b"q")
            second = await client.post(url, b"q")
        third = post_blocking(url, b"q")  # a synchronous caller on a loop does not nest it
        return [first.body, second.body, third.body]

    assert asyncio.run(main()) == [b"a", b"b", b"c"]


# --- one stack ---------------------------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
            found.add(node.module)
    return found


def stack_violations(path: Path, relative: str) -> list[str]:
    """Imports that break the one-stack rule in a module of ``ledger/``."""
    found = []
    for name in sorted(_imports(path)):
        if name == "http.server":
            found.append(f"{relative}: imports {name} (the HTTP servers are aiohttp's)")
        if name in ("urllib.request", "urllib.error"):
            found.append(f"{relative}: imports {name} (outbound HTTP is ledger.net.client's)")
        if name == "http.client" and relative != "ledger/net/keepalive.py":
            found.append(f"{relative}: imports {name} (kept-open connections are ledger.net's)")
        client = name.startswith("aiohttp.") and name.split(".")[1].startswith("Client")
        if (client or name == "aiohttp.client") and not relative.startswith("ledger/net/"):
            found.append(f"{relative}: imports {name} (outbound HTTP is ledger.net.client's)")
    return found


def _uses_aiohttp_client(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "aiohttp"
        and node.attr.startswith("Client")
        for node in ast.walk(tree)
    )


def test_ledger_has_one_http_server_stack_and_one_outbound_client() -> None:
    found = []
    for path in sorted((ROOT / "ledger").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        found += stack_violations(path, relative)
        if _uses_aiohttp_client(path) and not relative.startswith("ledger/net/"):
            found.append(f"{relative}: uses aiohttp.Client* (outbound HTTP is ledger.net's)")
    assert found == []


def test_the_stack_check_bites(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from http.server import ThreadingHTTPServer\nimport urllib.request\n"
        "from aiohttp import ClientSession\n"
    )
    found = stack_violations(bad, "ledger/log/bad.py")
    assert len(found) == 3, found
    assert stack_violations(bad, "ledger/net/bad.py") != []  # servers and urllib: nowhere
    used = tmp_path / "used.py"
    used.write_text("import aiohttp\nsession = aiohttp.ClientSession()\n")
    assert _uses_aiohttp_client(used)


def test_the_offline_verifier_tile_client_stays_on_the_standard_library() -> None:
    code = (
        "import sys, ledger_client.remote.tiles\n"
        "bad = {'aiohttp', 'ledger.net.client'} & set(sys.modules); assert not bad, bad\n"
        "assert 'urllib.request' in sys.modules"
    )
    processes.run([sys.executable, "-c", code], check=True, timeout=60)
