"""Where the SDK and the CLIs connect: arguments first, then LEDGER_* variables, then defaults;
the token never shows in a repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core.errors import FormatError
from ledger_client.remote.connection import DEFAULT_SERVER, Connection

ENV = {
    "LEDGER_SERVER": "log.example:443",
    "LEDGER_TOKEN": "dl_0123abcd_secret",
    "LEDGER_TLS_CA": "/etc/ca.pem",
}


def test_environment_then_arguments() -> None:
    assert Connection.resolve(environ={}) == Connection(address=DEFAULT_SERVER)
    conn = Connection.resolve(environ=ENV)
    assert conn.address == "log.example:443" and conn.token == "dl_0123abcd_secret"
    assert conn.tls and conn.tls_ca == Path("/etc/ca.pem")
    mine = Connection.resolve("127.0.0.1:1", token="dl_ffffffff_x", environ=ENV)
    assert mine.address == "127.0.0.1:1" and mine.token == "dl_ffffffff_x"
    assert "secret" not in repr(conn) and "dl_" not in str(conn)


def test_bad_combinations() -> None:
    with pytest.raises(FormatError, match="tls-key"):
        Connection.resolve(environ={"LEDGER_TLS_CERT": "c.pem"})
    with pytest.raises(FormatError, match="LEDGER_TOKEN") as caught:
        Connection.resolve(environ={"LEDGER_TOKEN": "two words"})
    assert "two words" not in str(caught.value)
    with pytest.raises(FormatError, match=r"no-such\.pem"):
        Connection(address="x:1", tls_ca=Path("no-such.pem")).read_tls()
