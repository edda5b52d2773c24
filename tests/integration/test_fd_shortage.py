"""A process out of file descriptors (EMFILE), as a reader flood leaves it: the writer's files
were opened once, so the high-water mark and the acknowledged size are still written; an HTTP
listener's ``accept`` and a new ``open_fd`` are retried with backoff and each logged once with a
count, and both succeed as soon as descriptors are free again. A real child process whose
descriptors are all taken (its own ``RLIMIT_NOFILE`` lowered, the rest opened on /dev/null)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import processes

pytestmark = pytest.mark.integration

SCRIPT = r"""
import asyncio, logging, os, resource, sys, threading
from pathlib import Path
from aiohttp import web
from ledger.core.checkpoint import Checkpoint, Ed25519Signer, sign_checkpoint
from ledger.fileio.durable import open_fd
from ledger.log.highwater import AckedSize, HighWaterMark, MarkState, checkpoint_from_note
from ledger.net.listener import ListenerLimits, serve_limited

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
folder = Path(sys.argv[1])
signer = Ed25519Signer.generate("fd.test/log")

def state(size):
    note = sign_checkpoint(Checkpoint(origin="fd.test/log", size=size, root_hash=bytes(32)), signer)
    return MarkState(checkpoint=checkpoint_from_note(note))

async def main():
    loop = asyncio.get_running_loop()
    mark, acked = HighWaterMark(folder / "mark"), AckedSize(folder / "mark.acked")
    mark.write(state(1))
    acked.write(1)
    limits = ListenerLimits()

    async def hello(request):
        return web.Response(text="ok")

    server = web.Server(hello, **limits.handler_options("probe"))
    listener = await serve_limited(server, "127.0.0.1", 0, limits, name="probe")
    await loop.run_in_executor(None, lambda: None)  # the executor thread exists before the hog
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
    hog = []
    try:
        while True:
            hog.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    mark.write(state(2))  # no new descriptor needed
    acked.write(2)
    print(listener.port, flush=True)
    opened = loop.run_in_executor(None, open_fd, folder / "late", os.O_RDWR | os.O_CREAT)
    await loop.run_in_executor(None, sys.stdin.readline)  # the test connected and waited
    for fd in hog:
        os.close(fd)
    os.close(await opened)
    await loop.run_in_executor(None, sys.stdin.readline)  # the test got its answer
    await listener.close()
    await server.shutdown(1.0)
    assert mark.read().checkpoint.size == 2 and acked.read() == 2
    print("written", flush=True)

asyncio.run(main())
"""


def test_out_of_descriptors_the_writer_writes_and_accept_and_open_retry(tmp_path: Path) -> None:
    proc = processes.spawn(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), proc.stderr.read()
    with socket.create_connection(("127.0.0.1", int(line)), timeout=10) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        time.sleep(0.5)  # accept and open fail meanwhile (EMFILE), and are retried
        proc.stdin.write("release\n")
        proc.stdin.flush()
        answer = client.recv(4096)
    proc.stdin.write("done\n")
    proc.stdin.flush()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.strip() == "written"
    assert answer.startswith(b"HTTP/1.1 200"), answer
    lines = err.splitlines()
    assert "Traceback" not in err
    accept_failed = [x for x in lines if "cannot accept a connection" in x]
    accept_again = [x for x in lines if "accepting again after" in x]
    open_failed = [x for x in lines if "cannot open" in x]
    opened_late = [x for x in lines if "after" in x and "failed attempts" in x]
    assert len(accept_failed) == 1 and "Too many open files" in accept_failed[0], err
    assert len(accept_again) == 1, err
    assert len(open_failed) == 1 and len(opened_late) == 1, err
    assert int(accept_again[0].split("after ")[1].split()[0]) >= 2  # counted, not logged
    assert int(opened_late[0].split("after ")[1].split()[0]) >= 2
