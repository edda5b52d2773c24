"""Options several ``ledger-verify`` subcommands share, kept light: defining a command imports
only click (what the options parse is imported when a command runs; ``cli.main``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from ledger.core.errors import FormatError

if TYPE_CHECKING:
    from cryptography import x509

    from ledger.core.note import Ed25519Verifier

__all__ = [
    "DEFAULT_MAX_DELAY_TEXT",
    "MAX_INPUT_BYTES",
    "agent_verifiers",
    "chain_options",
    "load_certificates",
    "read_input",
]

MAX_INPUT_BYTES = 1 << 20  # notes, proof files and tokens are a few kilobytes


def read_input(path: str, what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of file ``path`` (``-`` is stdin), refusing more than ``limit`` (receipts and
    records: ``ledger.core.limits.MAX_ITEM_BYTES``, the one size limit plus a receipt)."""
    with click.open_file(path, "rb") as stream:
        data: bytes = stream.read(limit + 1)
    if len(data) > limit:
        raise FormatError(f"{what} {path} is larger than {limit} bytes")
    return data


def load_certificates(paths: Sequence[str], option: str) -> list[x509.Certificate]:
    """Every certificate in the PEM (or DER) files given with ``option``."""
    if not paths:
        return []
    from cryptography import x509

    certs: list[x509.Certificate] = []
    for path in paths:
        data = read_input(path, option)
        try:
            if b"-----BEGIN" in data:
                certs += x509.load_pem_x509_certificates(data)
            else:
                certs.append(x509.load_der_x509_certificate(data))
        except ValueError as exc:
            raise FormatError(f"{option} {path}: not a PEM or DER certificate ({exc})") from None
    return certs


# ``format_delta(verdicts.DEFAULT_MAX_DELAY)``, for help texts (a test keeps them equal)
DEFAULT_MAX_DELAY_TEXT = "1 h"


def default_max_delay() -> timedelta:
    from ledger_client.audit.verdicts import DEFAULT_MAX_DELAY

    return DEFAULT_MAX_DELAY


def agent_verifiers(texts: Sequence[str]) -> tuple[Ed25519Verifier, ...]:
    """Parse ``--agent-key`` values (verifier keys, the log's vkey format)."""
    if not texts:
        return ()
    from ledger.core.note import Ed25519Verifier

    keys = []
    for text in texts:
        if text.strip().upper().startswith("PRIVATE+KEY"):
            raise click.BadParameter("--agent-key: give the verifier key, not the private key")
        try:
            keys.append(Ed25519Verifier.from_key_string(text))
        except Exception as exc:
            raise click.BadParameter(f"--agent-key {text[:40]!r}: {exc}") from None
    return tuple(keys)


def chain_options(fn: Callable[..., None]) -> Callable[..., None]:
    """``--tiles URL`` and ``--chain-key HEX`` for ``run``, ``report`` and ``index``: the
    presented runs' chain verdicts from the log's tiles (``cli.agent.chain_verdicts``)."""
    fn = click.option(
        "--chain-key", "chain_key", metavar="HEX", default=None,
        help="the agent's chain key: with --tiles, find withheld runs, forks and restarts",
    )(fn)  # fmt: skip
    return click.option(
        "--tiles", "tiles", metavar="URL", default=None,
        help="the log's C2SP tlog-tiles base URL (with --chain-key)",
    )(fn)  # fmt: skip
