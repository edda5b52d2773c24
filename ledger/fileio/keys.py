"""Signer key files (C2SP signed-note ``PRIVATE+KEY+...`` strings), written with mode 0600 and
read only when group and others have no access (``ledger.fileio.private``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import MalformedKeyError
from ledger.fileio.private import read_private, write_private

__all__ = [
    "default_key_file",
    "load_or_create_signer",
    "load_signer",
    "read_key_text",
    "write_signer",
]


class _SecretKey(Protocol):
    def key_string(self) -> str: ...


def default_key_file(name: str) -> Path:
    """A file name derived from a key name: ``log.example/agents`` -> ``log.example_agents.key``."""
    return Path(re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") + ".key")


def write_signer(path: Path, signer: _SecretKey, *, overwrite: bool = False) -> None:
    """Write the signer key string to ``path``, created with mode 0600 (never readable by
    anyone else), durably; ``FileExistsError`` when it exists, unless ``overwrite``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, signer.key_string() + "\n", exclusive=not overwrite)


def read_key_text(path: Path, what: str = "key file") -> str:
    """The key string in a private key file: ``KeyFileModeError`` when group or others may
    access it, ``FormatError`` when it cannot be read or is not text."""
    try:
        return read_private(path, what).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise MalformedKeyError(f"{path} is not a key file (binary data)") from None


def load_signer(path: Path) -> Ed25519Signer:
    """Read a signer key file (the mode policy of ``read_key_text``)."""
    return Ed25519Signer.from_key_string(read_key_text(path, "signer key"))


def load_or_create_signer(path: Path, name: str) -> tuple[Ed25519Signer, bool]:
    """Load the key at ``path``, or create one named ``name`` there; say whether it was created."""
    if path.exists():
        return load_signer(path), False
    signer = Ed25519Signer.generate(name)
    write_signer(path, signer)
    return signer, True
