"""Append items for log tests: n distinct SHA-256 digests, salted."""

from __future__ import annotations

import hashlib

from ledger.core.types import AppendItem


def items(n: int, salt: str = "") -> list[AppendItem]:
    return [AppendItem(hashlib.sha256(f"{salt}{i}".encode()).digest()) for i in range(n)]
