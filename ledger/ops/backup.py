"""Backups of a log: a consistent RocksDB checkpoint, the data dir's binding, and what it takes
to run the restored log as closed and as trusted as the original.

A backup directory holds:

- ``db/``: a RocksDB checkpoint (every column family at one sequence number, so entries, nodes,
  dedup keys, tree state, checkpoints and anchors agree);
- ``log.json``: the binding (origin, verifier keys, and the access state: a closed log stays
  closed when restored);
- ``tokens.json`` (when the log has a tokens file): each token's id, name, scopes, times and
  SHA-256, rebuilt field by field from the tokens file, so nothing else (never a token) is
  carried;
- ``trust/trust.json`` and ``trust/tsa-<n>-<m>.pem``: the TSA roots the log trusts (configured
  TSAs and the embedded development TSA's root, re-encoded from parsed certificates, so no key
  block can ride along), the TSAs' URLs (redacted: userinfo and query removed) and the witness
  settings (name, URL, cosigning key, timeout, quorum).

Never a private key: not the signer key (keep it, and its backup, apart from the data), not the
embedded TSA's key, not a TLS key. ``backup_store`` works on an open store, so the running server
takes it through the ``Backup`` admin RPC; ``backup_data_dir`` opens a stopped log.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.core.errors import FailedPreconditionError, FormatError, InvalidArgumentError
from ledger.core.redact import redact_url
from ledger.core.types import BackupOutcome
from ledger.fileio.private import write_private
from ledger.ops.binding import BINDING_FILE
from ledger.store.rocks import RocksStore

__all__ = [
    "TOKENS_FILE",
    "TRUST_DIR",
    "TRUST_FILE",
    "BackupTrust",
    "WitnessSetting",
    "backup_data_dir",
    "backup_store",
    "read_backup",
    "read_trust",
    "read_witnesses",
]

TOKENS_FILE = "tokens.json"
TRUST_DIR = "trust"
TRUST_FILE = "trust.json"
_TRUST_FORMAT = "decision-ledger/backup-trust/v1"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessSetting:
    """One configured witness, as a backup records it."""

    name: str
    url: str
    key: str
    timeout_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupTrust:
    """What the running log trusts and who may call it, for a backup to carry."""

    tokens_file: Path | None = None
    tsa_roots: Mapping[str, Sequence[Path]] = field(default_factory=dict)  # name -> PEM files
    tsa_urls: Mapping[str, str] = field(default_factory=dict)
    witnesses: Sequence[WitnessSetting] = ()
    witness_quorum: int = 0


def _prepare(out: Path) -> None:
    if not out.is_absolute():
        raise InvalidArgumentError(f"out_dir: {out} is relative; give an absolute path")
    if out.exists():
        raise InvalidArgumentError(f"out_dir: {out} exists; backups never overwrite")
    if not out.parent.is_dir():
        raise InvalidArgumentError(f"out_dir: {out.parent} is not a directory")


def _token_hashes(path: Path) -> str | None:
    """The tokens file rebuilt from its known fields (hashes only), or None without one."""
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
        kept = []
        for r in doc["tokens"]:
            if not _HEX64.match(str(r["sha256"])):
                raise ValueError(f"token {r.get('name')!r} has no SHA-256 hash")
            record = {
                "id": str(r["id"]),
                "name": str(r["name"]),
                "scopes": [str(s) for s in r["scopes"]],
                "created": int(r["created"]),
                "sha256": str(r["sha256"]),
            }
            if r.get("expires") is not None:
                record["expires"] = int(r["expires"])
            kept.append(record)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"tokens file {path} does not parse: {exc}") from None
    return json.dumps({"tokens": kept}, indent=2)


def _certificates(paths: Sequence[Path], what: str) -> list[bytes]:
    pems: list[bytes] = []
    for path in paths:
        try:
            certs = x509.load_pem_x509_certificates(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise FormatError(f"{what} {path}: not readable PEM certificates: {exc}") from None
        pems.extend(c.public_bytes(Encoding.PEM) for c in certs)
    return pems


def _write_trust(trust: BackupTrust, out: Path) -> None:
    folder = out / TRUST_DIR
    folder.mkdir(mode=0o700)
    tsas = []
    for n, (name, paths) in enumerate(sorted(trust.tsa_roots.items())):
        files = []
        for m, pem in enumerate(_certificates(paths, f"TSA {name} root")):
            file = f"tsa-{n}-{m}.pem"
            (folder / file).write_bytes(pem)
            files.append(file)
        url = trust.tsa_urls.get(name)
        tsas.append({"name": name, "url": redact_url(url) if url else None, "roots": files})
    doc = {
        "format": _TRUST_FORMAT,
        "tsas": tsas,
        "witnesses": [
            {"name": w.name, "url": redact_url(w.url), "key": w.key, "timeout_s": w.timeout_s}
            for w in trust.witnesses
        ],
        "witness_quorum": trust.witness_quorum,
    }
    write_private(folder / TRUST_FILE, json.dumps(doc, indent=2) + "\n")


def _trust_doc(folder: Path) -> dict[str, Any] | None:
    path = folder / TRUST_FILE
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise FormatError(f"{path} does not parse: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != _TRUST_FORMAT:
        raise FormatError(f"{path}: not a backup's trust file (want format {_TRUST_FORMAT!r})")
    return doc


def read_trust(folder: Path) -> dict[str, list[Path]]:
    """TSA name -> root PEM files of a backup's (or a restored data dir's) ``trust`` folder
    (empty when there is none)."""
    doc = _trust_doc(folder)
    if doc is None:
        return {}
    try:
        out: dict[str, list[Path]] = {}
        for tsa in doc["tsas"]:
            files = [str(f) for f in tsa["roots"]]
            if any("/" in f or f.startswith(".") for f in files):
                raise ValueError("a root file name leaves the folder")
            out.setdefault(str(tsa["name"]), []).extend(folder / f for f in files)
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FormatError(f"{folder / TRUST_FILE}: not a backup's trust file: {exc}") from None


def read_witnesses(folder: Path) -> list[WitnessSetting]:
    """The witness settings a backup's (or a restored data dir's) ``trust`` folder records."""
    doc = _trust_doc(folder)
    if doc is None:
        return []
    try:
        return [
            WitnessSetting(
                name=str(w["name"]),
                url=str(w["url"]),
                key=str(w["key"]),
                timeout_s=float(w["timeout_s"]),
            )
            for w in doc["witnesses"]
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"{folder / TRUST_FILE}: not a backup's trust file: {exc}") from None


def backup_store(
    store: RocksStore, data_dir: Path, out: Path, trust: BackupTrust | None = None
) -> BackupOutcome:
    """Back up an open store (safe while the log serves) into ``out`` (must not exist), with
    the binding and, from ``trust``, the token hashes, TSA roots and witness settings."""
    _prepare(out)
    binding = data_dir / BINDING_FILE
    if not binding.exists():
        raise FailedPreconditionError(f"{binding} is missing: the data dir is not bound")
    trust = trust or BackupTrust()
    hashes = _token_hashes(trust.tokens_file) if trust.tokens_file is not None else None
    out.mkdir(mode=0o700)
    try:
        store.backup_to(out / "db")
        shutil.copy2(binding, out / BINDING_FILE)
        if hashes is not None:
            write_private(out / TOKENS_FILE, hashes + "\n")
        _write_trust(trust, out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return read_backup(out)


def backup_data_dir(data_dir: Path, out: Path, trust: BackupTrust | None = None) -> BackupOutcome:
    """Back up a stopped log (a running server holds the RocksDB lock: use the RPC)."""
    _prepare(out)
    store = RocksStore(data_dir / "db", create=False)
    try:
        return backup_store(store, data_dir, out, trust)
    finally:
        store.close()


def read_backup(path: Path) -> BackupOutcome:
    """Open a backup's database and say what it holds."""
    if not (path / "db" / "CURRENT").exists() or not (path / BINDING_FILE).exists():
        raise FailedPreconditionError(f"{path} is not a backup (want db/ and {BINDING_FILE})")
    store = RocksStore(path / "db", create=False, memtable_mb=4, cache_mb=8)
    try:
        latest = store.latest_checkpoint()
        return BackupOutcome(
            out_dir=path,
            tree_size=store.load_state().size,
            checkpoint_size=latest.size if latest else 0,
        )
    finally:
        store.close()
