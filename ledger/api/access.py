"""The access log: one line per finished call on the ``ledger.access`` logger, in one format for
the gRPC API (``ledger.api.interceptor``) and the HTTP JSON append (``ledger.http.append``):
``<method> <status> <duration>ms <identity> <peer>``, with the same fields as a structured
``access`` extra (for ``log_format = "json"``). The token itself is never logged."""

from __future__ import annotations

import logging

__all__ = ["log_access"]

_access = logging.getLogger("ledger.access")


def log_access(method: str, status: str, elapsed_s: float, identity: str, peer: str) -> None:
    """One access-log line: ``status`` is the gRPC status name, or the HTTP status code."""
    _access.info(
        "%s %s %.1fms %s %s",
        method,
        status,
        elapsed_s * 1000,
        identity,
        peer,
        extra={
            "access": {
                "method": method,
                "status": status,
                "duration_ms": round(elapsed_s * 1000, 3),
                "identity": identity,
                "peer": peer,
            }
        },
    )
