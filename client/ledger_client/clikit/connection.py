"""The options every command that talks to a server shares: ``--server`` and the TLS files,
each with its environment variable; the bearer token comes from ``LEDGER_TOKEN`` or
``--token-file`` (never a flag value, which ``ps`` would show). No grpc here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ledger.core.errors import FormatError
from ledger_client.remote.connection import DEFAULT_SERVER, Connection

__all__ = ["connection_from", "connection_options"]

_F = TypeVar("_F", bound=Callable[..., Any])
_FILE = click.Path(dir_okay=False, path_type=Path)


def connection_options(fn: _F) -> _F:
    """Add ``--server``, ``--token-file``, ``--tls-ca``, ``--tls-cert``, ``--tls-key``."""
    options = [
        click.option("--server", "server", envvar="LEDGER_SERVER", default=DEFAULT_SERVER,
                     show_default=True, show_envvar=True, metavar="HOST:PORT",
                     help="log server (gRPC)"),
        click.option("--token-file", type=_FILE, envvar="LEDGER_TOKEN_FILE", show_envvar=True,
                     help="file holding a bearer token (default: $LEDGER_TOKEN, if set)"),
        click.option("--tls-ca", type=_FILE, envvar="LEDGER_TLS_CA", show_envvar=True,
                     help="CA certificate (PEM) to trust for the server; enables TLS"),
        click.option("--tls-cert", type=_FILE, envvar="LEDGER_TLS_CERT", show_envvar=True,
                     help="client certificate (PEM) for mTLS; enables TLS"),
        click.option("--tls-key", type=_FILE, envvar="LEDGER_TLS_KEY", show_envvar=True,
                     help="client private key (PEM) for mTLS"),
    ]  # fmt: skip
    for option in reversed(options):
        fn = option(fn)
    return fn


def connection_from(
    server: str,
    token_file: Path | None,
    tls_ca: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
) -> Connection:
    """The ``Connection`` the options describe (the token from the file, else the env)."""
    token = None
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise FormatError(f"--token-file {token_file}: cannot read a token ({exc})") from None
    return Connection.resolve(
        server, token=token, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key
    )
