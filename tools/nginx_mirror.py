"""Run a real nginx over a static tile mirror with the server block shipped in docs/operating.md.

Used by the integration test and by benchmark B11. nginx cannot bind port 0, so a free port is
taken from the OS first; nginx gets its own prefix, config, pid and logs in a temporary folder,
runs in the foreground (``daemon off``) and is stopped by the caller. Run as root, its workers
run as root too (``user root``) so that they can read a test's private temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["README", "find_nginx", "readme_server_block", "run_nginx"]

README = Path(__file__).resolve().parent.parent / "docs" / "operating.md"


def find_nginx() -> str | None:
    """The nginx binary, or None."""
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )


def readme_server_block(readme: Path = README) -> str:
    """The ```nginx block of docs/operating.md (the one operators copy)."""
    match = re.search(r"```nginx\n(.*?)```", readme.read_text(), re.DOTALL)
    if match is None:
        raise RuntimeError(f"{readme} has no ```nginx block")
    return match.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _config(block: str, root: Path, port: int, prefix: Path, workers: int) -> str:
    block = re.sub(r"listen [^;]+;", f"listen 127.0.0.1:{port};", block, count=1)
    block = re.sub(r"root [^;]+;", f"root {root};", block, count=1)
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {name}_temp_path {prefix / name};"
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"{user}worker_processes {workers};\ndaemon off;\npid {prefix / 'nginx.pid'};\n"
        f"error_log {prefix / 'error.log'} warn;\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n    access_log off;\n    keepalive_requests 1000000;\n{temp}\n{block}}}\n"
    )


def _wait_listening(port: int, proc: subprocess.Popen[bytes], prefix: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = (prefix / "error.log").read_text() if (prefix / "error.log").exists() else ""
            raise RuntimeError(f"nginx exited with {proc.returncode}: {log}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError("nginx did not start listening within 10 s")


@contextmanager
def run_nginx(root: Path, *, workers: int = 1, block: str | None = None) -> Iterator[str]:
    """nginx serving ``root`` with the README's server block; yields its base URL."""
    binary = find_nginx()
    if binary is None:
        raise FileNotFoundError("nginx is not installed (Debian: apt-get install nginx-light)")
    with tempfile.TemporaryDirectory(prefix="ledger-nginx-") as temp:
        prefix = Path(temp)
        port = _free_port()
        conf = prefix / "nginx.conf"
        conf.write_text(
            _config(block or readme_server_block(), root.resolve(), port, prefix, workers)
        )
        proc = subprocess.Popen(
            [binary, "-p", str(prefix), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_listening(port, proc, prefix)
            yield f"http://127.0.0.1:{port}/"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
