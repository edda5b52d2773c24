"""Where and how to reach a log server: address, bearer token, TLS files; from arguments or
the environment (``LEDGER_SERVER``, ``LEDGER_TOKEN``, ``LEDGER_TLS_CA``, ``LEDGER_TLS_CERT``,
``LEDGER_TLS_KEY``), arguments first. No grpc here (``ledger_client.remote`` builds the
channel): the SDK and the CLIs share it.

The token never appears in ``repr`` or in an error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ledger.core.errors import FormatError
from ledger.fileio.private import read_private

__all__ = ["DEFAULT_SERVER", "ENV", "Connection"]

DEFAULT_SERVER = "127.0.0.1:6962"
ENV = {
    "address": "LEDGER_SERVER",
    "token": "LEDGER_TOKEN",
    "tls_ca": "LEDGER_TLS_CA",
    "tls_cert": "LEDGER_TLS_CERT",
    "tls_key": "LEDGER_TLS_KEY",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """A server address and the credentials to present there."""

    address: str = DEFAULT_SERVER
    token: str | None = field(default=None, repr=False)
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None

    @property
    def tls(self) -> bool:
        """Whether to speak TLS (any TLS file given)."""
        return any(p is not None for p in (self.tls_ca, self.tls_cert, self.tls_key))

    @classmethod
    def resolve(
        cls,
        address: str | None = None,
        *,
        token: str | None = None,
        tls_ca: str | Path | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Connection:
        """Arguments, else the environment, else the defaults."""
        env = os.environ if environ is None else environ

        def pick(value: str | Path | None, key: str) -> str | None:
            if value is not None and str(value) != "":
                return str(value)
            got = env.get(ENV[key], "")
            return got or None

        cert, key = pick(tls_cert, "tls_cert"), pick(tls_key, "tls_key")
        if (cert is None) != (key is None):
            raise FormatError(
                "a client certificate needs its key: give both --tls-cert and --tls-key"
            )
        found_token = pick(token, "token")
        if found_token is not None and (not found_token.isprintable() or " " in found_token):
            raise FormatError("the token holds spaces or control characters (check LEDGER_TOKEN)")
        ca = pick(tls_ca, "tls_ca")
        return cls(
            address=pick(address, "address") or DEFAULT_SERVER,
            token=found_token,
            tls_ca=Path(ca) if ca else None,
            tls_cert=Path(cert) if cert else None,
            tls_key=Path(key) if key else None,
        )

    def read_tls(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """(CA, client key, client chain) PEM bytes, for ``grpc.ssl_channel_credentials``."""

        def read(path: Path | None, what: str) -> bytes | None:
            if path is None:
                return None
            try:
                return path.read_bytes()
            except OSError as exc:
                raise FormatError(f"{what} {path}: {exc.strerror}") from None

        return (
            read(self.tls_ca, "--tls-ca"),
            None if self.tls_key is None else read_private(self.tls_key, "--tls-key"),
            read(self.tls_cert, "--tls-cert"),
        )
