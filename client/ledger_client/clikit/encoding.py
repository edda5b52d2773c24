"""Text encodings of hashes shared by the CLIs: hex (RFC 9162 tooling) or base64 (C2SP formats)."""

from __future__ import annotations

import base64
import binascii
import string

from ledger.core.errors import FormatError

_HEX = frozenset(string.hexdigits)


def decode_hash(text: str) -> bytes:
    """Decode a hash written in hex (any case) or standard base64; raise FormatError otherwise.

    Length is not checked here: a hash of the wrong length is a verification failure, which the
    merkle core reports itself.
    """
    text = text.strip()
    if text and len(text) % 2 == 0 and set(text) <= _HEX:
        return bytes.fromhex(text)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise FormatError(f"{text[:80]!r} is neither hex nor base64") from None
