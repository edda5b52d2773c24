"""Checks that run before ``ledger serve`` touches the disk: can we listen where we are told,
and is plaintext acceptable there.

``check_listen`` binds (and releases) a socket on the address with the options the servers use,
so a busy port, an address of another host or a name that does not resolve is reported before a
data dir, a key or a TSA state is created. Plaintext gRPC is for loopback development: a
listener beyond loopback needs ``[tls]`` or the explicit ``[server] allow_plaintext = true``.
"""

from __future__ import annotations

import errno
import socket

from ledger.app.settings import Settings, is_loopback, parse_listen
from ledger.core.errors import FailedPreconditionError, FormatError

__all__ = ["check_listen", "check_plaintext"]


def check_listen(listen: str, what: str) -> None:
    """Raise a one-line error unless ``listen`` (HOST:PORT) can be bound right now."""
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        raise FormatError(f"{what} {exc}") from None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise FormatError(f"{what} {listen!r}: cannot resolve {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise FailedPreconditionError(
                    f"{what} {listen}: the port is in use (is another server running?)"
                ) from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise FailedPreconditionError(
                    f"{what} {listen}: {host} is not an address of this host"
                ) from None
            raise FailedPreconditionError(f"{what} {listen}: {exc.strerror}") from None


def check_plaintext(settings: Settings, *, tls_enabled: bool) -> None:
    """Refuse plaintext beyond loopback unless explicitly allowed."""
    host, _ = parse_listen(settings.listen)
    if tls_enabled or is_loopback(host) or settings.allow_plaintext:
        return
    raise FailedPreconditionError(
        f"listen {settings.listen} is beyond loopback: configure [tls] cert and key "
        "(`ledger tls dev-cert` for development), or set [server] allow_plaintext = true"
    )
