"""The one private-file policy: secrets are created 0600, and a key file that group or others
may read or write is refused.

Every private key the project reads goes through ``read_private`` (the log's signer key, a
witness's cosigner key, the embedded TSA's keys, TLS server and client keys, the tokens file),
and every secret it writes through ``write_private`` (``write_file`` with mode 0600: created
owner-only, never chmod-ed afterwards). A refusal is one line naming the file and the fix::

    signer key k.key has mode 0644: group/others may access it; run `chmod 600 k.key`
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ledger.core.errors import FormatError, KeyFileModeError
from ledger.fileio.durable import Data, write_file

__all__ = ["PRIVATE_MODE", "check_private_file", "read_private", "write_private"]

PRIVATE_MODE = 0o600


def _refuse(path: Path, what: str, mode: int) -> KeyFileModeError:
    return KeyFileModeError(
        f"{what} {path} has mode {mode:04o}: group/others may access it; run `chmod 600 {path}`"
    )


def check_private_file(path: Path, what: str) -> None:
    """Refuse ``path`` (``KeyFileModeError``) when group or others may read or write it."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise _refuse(path, what, mode)


def read_private(path: Path, what: str) -> bytes:
    """The bytes of the private file ``path``, refused when group or others may access it.

    The mode is checked on the opened file (no window between check and read); a file that
    cannot be read is a ``FormatError`` naming it.
    """
    try:
        with open(path, "rb") as stream:
            mode = stat.S_IMODE(os.fstat(stream.fileno()).st_mode)
            if mode & 0o077:
                raise _refuse(path, what, mode)
            return stream.read()
    except OSError as exc:
        raise FormatError(f"cannot read {what} {path}: {exc.strerror}") from None


def write_private(path: Path, data: Data, *, exclusive: bool = False) -> None:
    """Write the secret ``path`` durably, created with mode 0600 (``write_file``)."""
    write_file(path, data, mode=PRIVATE_MODE, exclusive=exclusive)
