"""The data dir is bound to its origin and key; keys are never silently replaced."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import FailedPreconditionError, FormatError, KeyFileModeError
from ledger.fileio.keys import write_signer
from ledger.ops.backup import _token_hashes, read_trust
from ledger.ops.binding import (
    AccessWatch,
    bind_signer,
    open_bound_signer,
    read_binding,
    rotate_key,
    set_access,
)

ORIGIN = "ledger.test/binding"


def make_log(tmp_path: Path) -> tuple[Path, Path, Ed25519Signer]:
    data, key = tmp_path / "data", tmp_path / "data" / "signer.key"
    signer, created = open_bound_signer(data, key, ORIGIN)
    assert created
    (data / "db").mkdir()  # as if the server had started
    return data, key, signer


def test_a_new_data_dir_is_0700_with_a_new_key_and_a_binding(tmp_path: Path) -> None:
    data, key, signer = make_log(tmp_path)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    binding = read_binding(data)
    assert binding is not None and binding.origin == ORIGIN
    assert binding.verifier_key == signer.verifier().key_string()
    again, created = open_bound_signer(data, key, ORIGIN)
    assert not created and again.key_string() == signer.key_string()


def test_another_origin_or_key_is_refused(tmp_path: Path) -> None:
    data, key, _ = make_log(tmp_path)
    with pytest.raises(FailedPreconditionError, match=r"holds the log 'ledger\.test/binding'"):
        open_bound_signer(data, key, "other.example/log")
    other = tmp_path / "other.key"
    write_signer(other, Ed25519Signer.generate(ORIGIN))
    with pytest.raises(FailedPreconditionError, match="rotate-key"):
        open_bound_signer(data, other, ORIGIN)
    with pytest.raises(FailedPreconditionError, match="rotate-key"):
        bind_signer(data, Ed25519Signer.generate(ORIGIN), ORIGIN)


def test_a_missing_key_on_an_existing_log_refuses_and_creates_nothing(tmp_path: Path) -> None:
    data, key, signer = make_log(tmp_path)
    key.unlink()
    with pytest.raises(FailedPreconditionError, match="missing") as caught:
        open_bound_signer(data, key, ORIGIN)
    assert signer.verifier().key_string() in str(caught.value)
    assert not key.exists()


def test_readable_private_keys_are_refused(tmp_path: Path) -> None:
    data, key, _ = make_log(tmp_path)
    key.chmod(0o640)
    with pytest.raises(KeyFileModeError, match="mode 0640"):
        open_bound_signer(data, key, ORIGIN)


def test_binary_key_and_binding_files_are_format_errors(tmp_path: Path) -> None:
    data, key, _ = make_log(tmp_path)
    (data / "log.json").write_bytes(b"\xff\x00\x01")
    with pytest.raises(FormatError, match="not UTF-8"):
        read_binding(data)
    key.write_bytes(b"\xff\x00\x01")
    with pytest.raises(FormatError):
        open_bound_signer(data, key, ORIGIN)


def test_a_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(FormatError, match="not a directory"):
        open_bound_signer(tmp_path / "file", tmp_path / "k", ORIGIN)


def test_rotation_is_deliberate_and_recorded(tmp_path: Path) -> None:
    data, key, old = make_log(tmp_path)
    rotated = rotate_key(data, key, None)
    assert rotated.previous_keys == (old.verifier().key_string(),)
    assert list(data.glob("signer.key.retired-*"))
    signer, created = open_bound_signer(data, key, ORIGIN)
    assert not created and signer.verifier().key_string() == rotated.verifier_key
    wrong = tmp_path / "wrong.key"
    write_signer(wrong, Ed25519Signer.generate("other.example/log"))
    with pytest.raises(FailedPreconditionError, match="named"):
        rotate_key(data, key, wrong)


def test_access_changes_are_recorded_and_survive_a_key_rotation(tmp_path: Path) -> None:
    data, key, _ = make_log(tmp_path)
    binding = read_binding(data)
    assert binding is not None and binding.access == "open" and not binding.access_events
    with pytest.raises(FormatError, match="reason"):
        set_access(data, "closed", by="test", reason="  ")
    closed, changed = set_access(data, "closed", by="test", reason="production", now=lambda: 7)
    assert changed and closed.closed
    assert [(e.state, e.at, e.reason) for e in closed.access_events] == [
        ("closed", 7, "production")
    ]
    _, again = set_access(data, "closed", by="test", reason="twice")
    assert not again  # the same state records nothing
    rotated = rotate_key(data, key, None)
    assert rotated.closed and rotated.access_events == closed.access_events
    watch = AccessWatch(data, clock=lambda: 0.0)
    assert watch.closed()
    (data / "log.json").unlink()  # a deleted binding does not reopen a running server
    assert watch.closed()


def test_a_backup_carries_token_hashes_only_and_safe_root_names(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    token = "dl_0123abcd_" + "s" * 43
    doc = {
        "tokens": [
            {"id": "0123abcd", "name": "w", "scopes": ["append"], "created": 1,
             "sha256": "ab" * 32, "expires": 9, "token": token, "note": "x"},
        ]
    }  # fmt: skip
    tokens.write_text(json.dumps(doc))
    kept = _token_hashes(tokens)
    assert kept is not None and token not in kept and "note" not in kept
    assert json.loads(kept)["tokens"][0]["expires"] == 9
    doc["tokens"][0]["sha256"] = token  # something other than a hash is refused
    tokens.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="no SHA-256"):
        _token_hashes(tokens)
    trust = tmp_path / "trust"
    trust.mkdir()
    bad = {"format": "decision-ledger/backup-trust/v1", "witnesses": [], "witness_quorum": 0,
           "tsas": [{"name": "t", "url": None, "roots": ["../../signer.key"]}]}  # fmt: skip
    (trust / "trust.json").write_text(json.dumps(bad))
    with pytest.raises(FormatError, match="leaves the folder"):
        read_trust(trust)
