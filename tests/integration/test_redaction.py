"""Secrets in a configured TSA URL stay secret, as an attacker would look for them: a real
``ledger serve`` whose TSA URL carries a password and an API key, asked to anchor; then the
unauthenticated ``/metrics``, the server's log and the AnchorNow reply are read for them."""

from __future__ import annotations

import hashlib
import re
import urllib.request
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger_client.remote.log import RemoteLog
from tests.harness import ORIGIN, ServerProcess, free_port
from tests.tsa_openssl import make_ca, pem

pytestmark = pytest.mark.integration

PASSWORD, API_KEY, FRAGMENT = "hunter2pw", "ApiKey9Zq", "frag7Wx"  # found nowhere else
SECRETS = re.compile(f"{PASSWORD}|{API_KEY}|{FRAGMENT}", re.IGNORECASE)


def test_tsa_url_secrets_reach_no_metric_log_or_reply(tmp_path: Path) -> None:
    key = tmp_path / "signer.key"
    write_signer(key, Ed25519Signer.generate(ORIGIN))
    root = tmp_path / "root.pem"
    root.write_bytes(pem(make_ca("unused root")))
    port = free_port()  # closed: nothing listens there
    url = f"http://user:{PASSWORD}@127.0.0.1:{port}/tsa?apikey={API_KEY}#{FRAGMENT}"
    config = tmp_path / "ledger.toml"
    config.write_text(
        f'[anchor]\n\n[[anchor.tsa]]\nname = "keyed"\nurl = "{url}"\nroots = ["{root}"]\n'
        "timeout_s = 3\n"
    )
    server = ServerProcess(tmp_path / "data", key, "--config", str(config))
    try:
        log = RemoteLog(server.address, timeout=60)
        try:
            digests = [hashlib.sha256(f"r{i}".encode()).digest() for i in range(3)]
            log.append(digests, wait_for_checkpoint=True)
            _size, anchors, failures = log.anchor_now()
        finally:
            log.close()
        with urllib.request.urlopen(f"http://{server.ready['metrics']}/metrics", timeout=10) as r:
            metrics = r.read().decode()
    finally:
        server.terminate()
    logged = server.log_path.read_text()

    assert anchors == [] and len(failures) == 1 and failures[0].startswith("keyed:"), failures
    assert "127.0.0.1" in failures[0] and "/tsa" in failures[0]  # still says which endpoint
    assert "TSA keyed attempt" in logged  # the failures were logged: the check saw them
    for where, text in (("reply", " ".join(failures)), ("log", logged), ("metrics", metrics)):
        assert SECRETS.search(text) is None, f"a secret in the {where}: {text}"
    # a metric label carries the error's class, not its free text
    assert 'ledger_anchor_last_error{error="TimestampError/network",tsa="keyed"} 1.0' in metrics
