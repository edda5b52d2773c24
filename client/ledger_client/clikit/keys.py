"""Key options shared by the CLIs: ``--key`` (log verifier keys, c2sp.org/signed-note type
0x01) and ``--witness``/``--min-witnesses`` (c2sp.org/tlog-cosignature keys, type 0x04).

A bad key is a usage error (exit 2) naming the option and a shortened value; a private signer
key given where a verifier key belongs is never echoed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ledger.core.errors import MalformedKeyError
from ledger.core.note import Ed25519Verifier

if TYPE_CHECKING:
    from ledger.core.checkpoint import CosignatureVerifier

__all__ = ["log_verifiers", "witness_options", "witness_policy"]

_K = TypeVar("_K")


def _parse_keys(option: str, texts: Sequence[str], parse: Callable[[str], _K]) -> list[_K]:
    """Parse key strings; MalformedKeyError (exit 2) names the option and the bad value."""
    keys = []
    for text in texts:
        try:
            keys.append(parse(text))
        except MalformedKeyError as exc:
            if text.strip().upper().startswith("PRIVATE+KEY"):  # never echo a private key
                raise MalformedKeyError(
                    f"{option}: this is a private signer key; give the verifier key "
                    "(`ledger verifier-key` prints it) and keep the private key secret"
                ) from None
            raise MalformedKeyError(f"{option} {_shown(text)}: {exc}") from None
    return keys


def _shown(text: str) -> str:
    """A bad key string as shown in an error: short, so a pasted secret is not echoed whole."""
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def log_verifiers(texts: Sequence[str]) -> list[Ed25519Verifier]:
    """Parse ``--key`` values: Ed25519 verifier key strings (type 0x01)."""
    return _parse_keys("--key", texts, Ed25519Verifier.from_key_string)


def _witness_verifiers(texts: Sequence[str]) -> list[CosignatureVerifier]:
    if not texts:
        return []
    from ledger.core.checkpoint import CosignatureVerifier  # only with --witness (start-up)

    return _parse_keys("--witness", texts, CosignatureVerifier.from_key_string)


def witness_policy(
    witnesses: Sequence[str], min_witnesses: int | None
) -> tuple[list[CosignatureVerifier], int]:
    """``--witness`` keys (type 0x04) and the number of their cosignatures required."""
    keys = _witness_verifiers(witnesses)
    return keys, _quorum(len(keys), min_witnesses)


def witness_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--witness VKEY`` (repeatable) and ``--min-witnesses K`` (default 1 with --witness)."""
    command = click.option(
        "--min-witnesses", type=click.IntRange(min=0), metavar="K", help="default 1 with --witness"
    )(command)
    return click.option(
        "--witness",
        "witnesses",
        multiple=True,
        metavar="VKEY",
        help="witness cosigner key (tlog-cosignature, type 0x04); repeat",
    )(command)


def _quorum(witnesses: int, min_witnesses: int | None) -> int:
    """The number of witness cosignatures required (see the module docstring)."""
    required = (1 if witnesses else 0) if min_witnesses is None else min_witnesses
    if not 0 <= required <= witnesses:
        raise click.BadParameter(
            f"--min-witnesses {required} needs 0..{witnesses} (the number of --witness keys)"
        )
    return required
