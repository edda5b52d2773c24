"""Time-Stamping Authorities over the network (RFC 3161 §3.4) and the embedded development TSA.

- :class:`TsaClient` POSTs a TimeStampReq to a TSA URL through the server's one outbound HTTP
  client (:mod:`ledger.net.client`) and returns the token only after
  :func:`ledger.timestamp.rfc3161.verify_response` accepted it (status, imprint, nonce,
  signature, ESSCertID, EKU, chain to the configured roots). Transport failures raise
  :class:`~ledger.core.errors.TimestampError` with check ``"http"`` (non-200, wrong content
  type, oversized reply) or ``"network"`` (refused, unreachable, timed out).
- :class:`TsaAuthority` (:mod:`ledger.tsa.authority`) signs tokens; :class:`TsaServer`
  (:mod:`ledger.tsa.server`) serves it over HTTP; :func:`run_tsa` is what ``ledger tsa`` runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509

from ledger.core.errors import FormatError, RemoteError, ServiceError, TimestampError
from ledger.core.redact import redact_url
from ledger.net.client import post_blocking
from ledger.timestamp.rfc3161 import VerifiedTimestamp, build_request, verify_response
from ledger.tsa.authority import TSA_POLICY_OID, SerialNumbers, TsaAuthority
from ledger.tsa.server import QUERY_CONTENT_TYPE, REPLY_CONTENT_TYPE, TsaServer

__all__ = [
    "DEFAULT_TSA_NAME",
    "TSA_POLICY_OID",
    "SerialNumbers",
    "TsaAuthority",
    "TsaClient",
    "TsaServer",
    "open_authority",
    "run_tsa",
]

DEFAULT_TSA_NAME = "Decision Ledger development TSA"
MAX_REPLY_BYTES = 1024 * 1024
# Some TSAs still answer with the pre-RFC name of the media type.
_REPLY_TYPES = (REPLY_CONTENT_TYPE, "application/timestamp-response")


class TsaClient:
    """Ask one RFC 3161 TSA for tokens and verify each before returning it."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        roots: Sequence[x509.Certificate],
        intermediates: Sequence[x509.Certificate] = (),
    ) -> None:
        if urlsplit(url).scheme not in ("http", "https"):
            raise FormatError(f"TSA URL must be http:// or https://, got {redact_url(url)!r}")
        if not roots:
            raise FormatError("a TSA client needs at least one trusted TSA root")
        self.url = url
        self.shown_url = redact_url(url)  # what messages show (``ledger.core.redact``)
        self.timeout = timeout
        self.roots = tuple(roots)
        self.intermediates = tuple(intermediates)

    def timestamp(
        self, digest: bytes, *, at_time: datetime | None = None
    ) -> tuple[bytes, VerifiedTimestamp]:
        """A verified token over the SHA-256 ``digest``: ``(token_der, VerifiedTimestamp)``."""
        request = build_request(digest)
        reply = self._post(request.der)
        verified = verify_response(
            reply,
            digest=digest,
            nonce=request.nonce,
            roots=self.roots,
            intermediates=self.intermediates,
            at_time=at_time,
        )
        return verified.token_der, verified

    def _post(self, query: bytes) -> bytes:
        headers = {"Content-Type": QUERY_CONTENT_TYPE, "Accept": REPLY_CONTENT_TYPE}
        try:
            reply = post_blocking(
                self.url, query, headers=headers, timeout_s=self.timeout, max_bytes=MAX_REPLY_BYTES
            )
        except RemoteError:
            raise TimestampError(
                "http", f"TSA {self.shown_url} reply exceeds {MAX_REPLY_BYTES} bytes"
            ) from None
        except ServiceError as exc:  # unreachable, refused, timed out
            raise TimestampError("network", f"TSA {self.shown_url} unreachable: {exc}") from exc
        return self._checked_reply(reply.status, reply.content_type, reply.body)

    def _checked_reply(self, status: int, content_type: str, body: bytes) -> bytes:
        if status != 200:
            raise TimestampError("http", f"TSA {self.shown_url} answered HTTP {status}")
        if content_type not in _REPLY_TYPES:
            raise TimestampError(
                "http", f"TSA {self.shown_url} answered {content_type}, not {REPLY_CONTENT_TYPE}"
            )
        if len(body) > MAX_REPLY_BYTES:
            raise TimestampError(
                "http", f"TSA {self.shown_url} reply exceeds {MAX_REPLY_BYTES} bytes"
            )
        return body


def open_authority(state_dir: Path, *, name: str = DEFAULT_TSA_NAME) -> TsaAuthority:
    """The authority saved in ``state_dir``, generating and saving one on first use."""
    if not TsaAuthority.exists(state_dir):
        TsaAuthority.generate(name).save(state_dir)
    return TsaAuthority.load(state_dir)


def run_tsa(
    host: str,
    port: int,
    state_dir: Path | str,
    *,
    name: str = DEFAULT_TSA_NAME,
    on_ready: Callable[[TsaServer, TsaAuthority], None] | None = None,
) -> None:
    """Serve the development TSA kept in ``state_dir`` until interrupted (blocking).

    ``on_ready(server, authority)`` runs once the port is bound: the place to print
    ``server.url`` and where the root certificate is (``state_dir/root.pem``). Stop from
    another thread with ``server.stop()``, or with Ctrl-C.
    """
    authority = open_authority(Path(state_dir), name=name)
    server = TsaServer(authority, host=host, port=port)
    ready = None if on_ready is None else (lambda: on_ready(server, authority))
    with contextlib.suppress(KeyboardInterrupt):
        server.serve(on_bound=ready)
