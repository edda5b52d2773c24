"""Starting the tests' SeaweedFS (``tools.seaweed.run_seaweedfs``) when another process takes one
of its ports between ``_ports`` and weed's own bind: a parallel test's server that answers HTTP
on the S3 port must not pass for the gateway, and weed starts again on fresh ports."""

from __future__ import annotations

import http.server
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests import processes
from tools import seaweed

pytestmark = pytest.mark.integration


class _Plain(http.server.BaseHTTPRequestHandler):
    """Another process's HTTP server: it answers, but it is not SeaweedFS."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_a_port_taken_before_weed_binds_it_is_started_again_on_fresh_ports(
    tmp_path: Path,
) -> None:
    squatters: list[http.server.HTTPServer] = []

    def spawn(args: list[str], **kwargs: Any) -> Any:
        if not squatters:  # the first start: its S3 port is taken by an answering server
            port = int(next(a for a in args if a.startswith("-s3.port=")).partition("=")[2])
            squatter = http.server.HTTPServer(("127.0.0.1", port), _Plain, bind_and_activate=False)
            squatter.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.server_bind()
            squatter.server_activate()
            threading.Thread(target=squatter.serve_forever, daemon=True).start()
            squatters.append(squatter)
        return processes.spawn(args, **kwargs)

    try:
        with seaweed.run_seaweedfs(tmp_path, spawn=spawn, kill=processes.kill_group) as store:
            taken = squatters[0].server_address[1]
            assert not store.endpoint.endswith(f":{taken}")
            try:
                urllib.request.urlopen(store.endpoint + "/", timeout=5)
            except urllib.error.HTTPError as exc:
                assert str(exc.headers.get("Server", "")).startswith("SeaweedFS")
            assert (tmp_path / "data-2").is_dir()  # the second start had a data dir of its own
    finally:
        for squatter in squatters:
            squatter.shutdown()
            squatter.server_close()
