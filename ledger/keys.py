"""Signer key files (C2SP signed-note ``PRIVATE+KEY+...`` strings), written with mode 0600."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ledger.checkpoint import Ed25519Signer
from ledger.errors import MalformedKeyError

__all__ = ["default_key_file", "load_or_create_signer", "load_signer", "write_signer"]


def default_key_file(name: str) -> Path:
    """A file name derived from a key name: ``log.example/agents`` -> ``log.example_agents.key``."""
    return Path(re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") + ".key")


def write_signer(path: Path, signer: Ed25519Signer, *, overwrite: bool = False) -> None:
    """Write the signer key string to ``path`` with mode 0600 (never world-readable)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(signer.key_string() + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, 0o600)


def load_signer(path: Path) -> Ed25519Signer:
    """Read a signer key file."""
    try:
        text = path.read_bytes().decode("utf-8").strip()
    except OSError as exc:
        raise MalformedKeyError(f"cannot read signer key {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise MalformedKeyError(f"signer key {path} is not a key file (binary data)") from None
    return Ed25519Signer.from_key_string(text)


def load_or_create_signer(path: Path, name: str) -> tuple[Ed25519Signer, bool]:
    """Load the key at ``path``, or create one named ``name`` there; say whether it was created."""
    if path.exists():
        return load_signer(path), False
    signer = Ed25519Signer.generate(name)
    write_signer(path, signer)
    return signer, True
