"""Signer key files (C2SP signed-note ``PRIVATE+KEY+...`` strings), written with mode 0600."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import MalformedKeyError

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
    """Write the signer key string to ``path`` with mode 0600 (never world-readable)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(signer.key_string() + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, 0o600)


def read_key_text(path: Path) -> str:
    """The key string in a key file (MalformedKeyError when it cannot be read)."""
    try:
        return path.read_bytes().decode("utf-8").strip()
    except OSError as exc:
        raise MalformedKeyError(f"cannot read key file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise MalformedKeyError(f"{path} is not a key file (binary data)") from None


def load_signer(path: Path) -> Ed25519Signer:
    """Read a signer key file."""
    return Ed25519Signer.from_key_string(read_key_text(path))


def load_or_create_signer(path: Path, name: str) -> tuple[Ed25519Signer, bool]:
    """Load the key at ``path``, or create one named ``name`` there; say whether it was created."""
    if path.exists():
        return load_signer(path), False
    signer = Ed25519Signer.generate(name)
    write_signer(path, signer)
    return signer, True
