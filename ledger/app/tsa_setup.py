"""Building the anchorer's TSA targets from the configuration (RFC 3161 clients, embedded TSA).

Configured TSAs get a verifying ``TsaClient`` with their trust roots. With ``embedded_tsa`` the
development TSA kept in ``<data_dir>/tsa`` is served on a loopback port for the anchorer to
call over real HTTP. It is run by the log's own operator, so its tokens prove nothing to a
third party; production configurations name independent TSAs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509

from ledger.app.settings import Settings, TsaSettings
from ledger.core.errors import FormatError
from ledger.core.redact import redact_url
from ledger.log.anchoring import TsaTarget

if TYPE_CHECKING:
    from ledger.tsa.client import TsaServer

__all__ = ["EMBEDDED_TSA_NAME", "TsaSetup", "load_pems", "setup_tsas"]

EMBEDDED_TSA_NAME = "embedded-dev"
_log = logging.getLogger("ledger.anchor")


@dataclass(slots=True)
class TsaSetup:
    """The targets, and the embedded TSA server to stop when done (if any)."""

    targets: list[TsaTarget] = field(default_factory=list)
    embedded: TsaServer | None = None
    embedded_root: Path | None = None

    def close(self) -> None:
        """Stop the embedded TSA."""
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None


def load_pems(paths: tuple[Path, ...], what: str) -> list[x509.Certificate]:
    """Certificates from PEM files (each may hold several)."""
    certs: list[x509.Certificate] = []
    for path in paths:
        try:
            certs.extend(x509.load_pem_x509_certificates(path.read_bytes()))
        except OSError as exc:
            raise FormatError(f"{what} {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise FormatError(f"{what} {path} is not PEM certificates: {exc}") from None
    return certs


def _client(tsa: TsaSettings) -> TsaTarget:
    from ledger.tsa.client import TsaClient  # RFC 3161 loads only where a TSA is configured

    client = TsaClient(
        tsa.url,
        timeout=tsa.timeout_s,
        roots=load_pems(tsa.roots, f"TSA {tsa.name} root"),
        intermediates=load_pems(tsa.intermediates, f"TSA {tsa.name} intermediate"),
    )
    return TsaTarget(tsa.name, client)


def setup_tsas(settings: Settings) -> TsaSetup:
    """Targets for every configured TSA, plus the embedded development TSA when enabled."""
    setup = TsaSetup(targets=[_client(t) for t in settings.tsas])
    if settings.embedded_tsa:
        from ledger.tsa.client import TsaClient, TsaServer, open_authority

        state = settings.data_dir / "tsa"
        authority = open_authority(state)
        server = TsaServer(authority, host="127.0.0.1", port=0).start()
        roots = x509.load_pem_x509_certificates(authority.root_pem())
        setup.embedded = server
        setup.embedded_root = state / "root.pem"
        setup.targets.append(
            TsaTarget(EMBEDDED_TSA_NAME, TsaClient(server.url, timeout=5, roots=roots))
        )
        _log.warning(
            "embedded development TSA at %s: its tokens prove nothing to third parties; "
            "configure independent TSAs ([[anchor.tsa]]) for real use",
            redact_url(server.url),
        )
    return setup
