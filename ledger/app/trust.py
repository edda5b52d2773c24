"""What the log trusts, gathered from the settings and the data dir: the TSA roots that anchors
are checked against (``tsa_roots``: configured TSAs, the embedded development TSA's root, and
the roots a restore put back in ``<data_dir>/trust``), and what a backup carries of it
(``backup_trust``: token hashes, TSA roots and URLs, witness settings; never a private key).
"""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from ledger.app.settings import Settings
from ledger.app.tsa_setup import EMBEDDED_TSA_NAME, load_pems
from ledger.ops.backup import TRUST_DIR, BackupTrust, WitnessSetting, read_trust

__all__ = ["backup_trust", "tsa_roots"]


def _root_files(settings: Settings, data_dir: Path) -> dict[str, list[Path]]:
    files = {t.name: list(t.roots) for t in settings.tsas}
    embedded = data_dir / "tsa" / "root.pem"
    if embedded.exists():
        files.setdefault(EMBEDDED_TSA_NAME, []).append(embedded)
    return files


def tsa_roots(
    settings: Settings, data_dir: Path | None = None
) -> dict[str, list[x509.Certificate]]:
    """Trust roots per TSA name for the log in ``data_dir`` (default the settings' data dir):
    the configured TSAs', the embedded TSA's, and those a restore put back."""
    where = data_dir or settings.data_dir
    files = _root_files(settings, where)
    for name, restored in read_trust(where / TRUST_DIR).items():
        files.setdefault(name, []).extend(restored)
    return {name: load_pems(tuple(paths), f"TSA {name} root") for name, paths in files.items()}


def backup_trust(settings: Settings) -> BackupTrust:
    """What a backup of this log carries beside its database and binding."""
    files = _root_files(settings, settings.data_dir)
    for name, restored in read_trust(settings.data_dir / TRUST_DIR).items():
        files.setdefault(name, []).extend(restored)
    return BackupTrust(
        tokens_file=settings.token_file,
        tsa_roots=files,
        tsa_urls={t.name: t.url for t in settings.tsas},
        witnesses=[
            WitnessSetting(name=w.name, url=w.url, key=w.key, timeout_s=w.timeout_s)
            for w in settings.witnesses
        ],
        witness_quorum=settings.witness_quorum,
    )
