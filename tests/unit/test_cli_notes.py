"""``ledger-verify checkpoint`` / ``tlog-proof`` through click's runner and a real subprocess."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.core.checkpoint import (
    Checkpoint,
    CosignatureSigner,
    Ed25519Signer,
    add_signatures,
    sign_checkpoint,
    sign_note,
)
from ledger.core.tlogproof import TlogProof
from ledger_client.cli.main import main
from tests import processes
from tests.offline import OFFLINE_PROBE
from tests.reference import leaf_data, mth, ref_inclusion, ref_leaf_hash

ORIGIN = "ledger.example.com/agents/2026"
SIZE, INDEX = 13, 5
CHECKPOINT = Checkpoint(origin=ORIGIN, size=SIZE, root_hash=mth(0, SIZE))
LOG = Ed25519Signer.generate(ORIGIN)
MIRROR = Ed25519Signer.generate("mirror.example.com")
STRANGER = Ed25519Signer.generate("stranger.example.com")
W1, W2, W3 = (CosignatureSigner.generate(f"witness{i}.example.com") for i in (1, 2, 3))


def vkey(signer: Ed25519Signer | CosignatureSigner) -> str:
    return signer.verifier().key_string()


def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    return result.exit_code, result.output


def run_json(*args: str, stdin: str | None = None) -> tuple[int, dict[str, Any]]:
    code, out = run(*args, "--json", stdin=stdin)
    payload: dict[str, Any] = json.loads(out)
    return code, payload


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return str(path)


def signed_by(*signers: Ed25519Signer) -> str:
    return sign_note(CHECKPOINT.to_text(), list(signers))


def cosigned(note: str, *witnesses: CosignatureSigner, at: int = 1_767_225_600) -> str:
    return add_signatures(note, [w.cosign(CHECKPOINT, at) for w in witnesses])


def corrupt_signature(note: str, name: str) -> str:
    """Flip the last signature byte of the line by ``name``."""
    lines = note.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(f"— {name} "):
            prefix, encoded = line.rsplit(" ", 1)
            raw = bytearray(base64.b64decode(encoded))
            raw[-1] ^= 1
            lines[i] = f"{prefix} {base64.b64encode(bytes(raw)).decode()}"
    return "\n".join(lines)


# --- checkpoint ---------------------------------------------------------------------------------


def test_note_signed_by_several_keys(tmp_path: Path) -> None:
    note = write(tmp_path, "cp", signed_by(LOG, MIRROR))
    code, payload = run_json("checkpoint", note, "--key", vkey(LOG), "--key", vkey(MIRROR))
    assert code == 0, payload
    assert payload["valid"] is True and payload["check"] == "checkpoint"
    assert payload["origin"] == ORIGIN and payload["size"] == SIZE
    assert payload["root_hash_hex"] == mth(0, SIZE).hex()
    assert base64.b64decode(payload["root_hash"]) == mth(0, SIZE)
    assert payload["signed_by"] == [
        f"{ORIGIN}+{LOG.key_id.hex()}",
        f"mirror.example.com+{MIRROR.key_id.hex()}",
    ]


def test_human_output_names_origin_size_root_and_signers(tmp_path: Path) -> None:
    note = write(tmp_path, "cp", cosigned(signed_by(LOG), W1))
    code, out = run("checkpoint", note, "--key", vkey(LOG), "--witness", vkey(W1))
    assert code == 0, out
    assert ORIGIN in out and str(SIZE) in out
    assert mth(0, SIZE).hex() in out and base64.b64encode(mth(0, SIZE)).decode() in out
    assert f"signed by:   {ORIGIN}+{LOG.key_id.hex()}" in out
    assert "witness1.example.com" in out and "2026-01-01T00:00:00Z" in out


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    note = signed_by(STRANGER, LOG)
    code, payload = run_json("checkpoint", write(tmp_path, "cp", note), "--key", vkey(LOG))
    assert code == 0, payload
    assert payload["signed_by"] == [f"{ORIGIN}+{LOG.key_id.hex()}"]
    broken = write(tmp_path, "broken", corrupt_signature(note, "stranger.example.com"))
    assert run("checkpoint", broken, "--key", vkey(LOG))[0] == 0


def test_no_signature_by_a_given_key_is_invalid(tmp_path: Path) -> None:
    code, payload = run_json(
        "checkpoint", write(tmp_path, "cp", signed_by(STRANGER)), "--key", vkey(LOG)
    )
    assert code == 1
    assert payload["valid"] is False and "no signature by a trusted log key" in payload["error"]


def test_bad_signature_of_a_known_key_is_invalid(tmp_path: Path) -> None:
    note = write(tmp_path, "cp", corrupt_signature(signed_by(LOG, MIRROR), "mirror.example.com"))
    code, payload = run_json("checkpoint", note, "--key", vkey(LOG), "--key", vkey(MIRROR))
    assert code == 1
    assert "invalid signature by known key mirror.example.com" in payload["error"]
    assert run("checkpoint", note, "--key", vkey(LOG))[0] == 0  # MIRROR not given: ignored


def test_origin(tmp_path: Path) -> None:
    note = write(tmp_path, "cp", sign_checkpoint(CHECKPOINT, LOG))
    assert run("checkpoint", note, "--key", vkey(LOG), "--origin", ORIGIN)[0] == 0
    code, payload = run_json("checkpoint", note, "--key", vkey(LOG), "--origin", "other.example")
    assert code == 1
    assert "is not the expected 'other.example'" in payload["error"]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("not a note\n", "no blank line"),
        (f"{ORIGIN}\n{SIZE}\n{base64.b64encode(mth(0, SIZE)).decode()}\n", "no blank line"),
        (sign_note("hello\n", [LOG]), "checkpoint has 1 line"),
        (signed_by(LOG).replace("— ", "- "), "does not start with '— '"),
        ("\xff\xfe", "not UTF-8"),
    ],
)
def test_malformed_note_is_usage_error(tmp_path: Path, text: str, complaint: str) -> None:
    data: str | bytes = text.encode("latin-1") if text.startswith("\xff") else text
    code, payload = run_json("checkpoint", write(tmp_path, "cp", data), "--key", vkey(LOG))
    assert code == 2
    assert complaint in payload["error"]


def test_bad_key_strings_are_usage_errors(tmp_path: Path) -> None:
    note = write(tmp_path, "cp", signed_by(LOG))
    code, payload = run_json("checkpoint", note, "--key", "not-a-key")
    assert code == 2
    assert payload["error"].startswith("--key 'not-a-key': key string must have the form")
    code, payload = run_json("checkpoint", note, "--key", vkey(W1))  # a witness key as log key
    assert code == 2 and "unsupported signature type 0x04" in payload["error"]
    code, payload = run_json("checkpoint", note, "--key", vkey(LOG), "--witness", vkey(LOG))
    assert code == 2 and payload["error"].startswith("--witness")
    code, out = run("checkpoint", note, "--key", "x+00000000+AQ==")
    assert code == 2 and "error: --key" in out
    assert run("checkpoint", note)[0] == 2  # --key is required


def test_witness_quorum(tmp_path: Path) -> None:
    note = write(tmp_path, "cp", cosigned(signed_by(LOG), W1, W2))
    witnesses = ["--witness", vkey(W1), "--witness", vkey(W2), "--witness", vkey(W3)]
    base = ["checkpoint", note, "--key", vkey(LOG), *witnesses]
    code, payload = run_json(*base, "--min-witnesses", "2")
    assert code == 0, payload
    assert [c["witness"].split("+")[0] for c in payload["cosigned_by"]] == [
        "witness1.example.com",
        "witness2.example.com",
    ]
    assert payload["cosigned_by"][0]["time"] == 1_767_225_600
    assert payload["cosigned_by"][0]["time_utc"] == "2026-01-01T00:00:00Z"
    code, payload = run_json(*base, "--min-witnesses", "3")
    assert code == 1 and "2 trusted witness(es) cosigned validly, 3 required" in payload["error"]
    assert run(*base)[0] == 0  # default: one witness suffices
    alone = ["checkpoint", note, "--key", vkey(LOG), "--witness", vkey(W3)]
    assert run(*alone)[0] == 1
    assert run(*alone, "--min-witnesses", "0")[0] == 0
    code, payload = run_json(*base, "--min-witnesses", "4")
    assert code == 2 and "--min-witnesses 4" in payload["error"]


def test_bad_cosignature_of_a_given_witness_is_invalid(tmp_path: Path) -> None:
    note = corrupt_signature(cosigned(signed_by(LOG), W1, W2), "witness2.example.com")
    path = write(tmp_path, "cp", note)
    args = ["checkpoint", path, "--key", vkey(LOG), "--witness", vkey(W1)]
    assert run(*args)[0] == 0
    assert run(*args, "--witness", vkey(W2))[0] == 1


def test_stdin() -> None:
    note = signed_by(LOG)
    assert run("checkpoint", "-", "--key", vkey(LOG), stdin=note)[0] == 0
    assert run("checkpoint", "--key", vkey(LOG), stdin=note)[0] == 0  # FILE defaults to stdin
    assert run("checkpoint", "-", "--key", vkey(LOG), stdin="garbage")[0] == 2


def test_missing_file_is_usage_error(tmp_path: Path) -> None:
    code, payload = run_json("checkpoint", str(tmp_path / "absent"), "--key", vkey(LOG))
    assert code == 2 and "absent" in payload["error"]


# --- tlog-proof ---------------------------------------------------------------------------------


def proof_text(*, index: int = INDEX, proof: list[bytes] | None = None, note: str = "") -> str:
    hashes = ref_inclusion(index, SIZE) if proof is None else proof
    return TlogProof(
        index=index, proof=tuple(hashes), checkpoint_note=note or signed_by(LOG)
    ).to_text()


def test_tlog_proof_valid_with_leaf_or_leaf_hash(tmp_path: Path) -> None:
    path = write(tmp_path, "proof", proof_text())
    leaf = write(tmp_path, "leaf", leaf_data(INDEX))
    code, payload = run_json("tlog-proof", path, "--key", vkey(LOG), "--leaf", leaf)
    assert code == 0, payload
    assert payload["check"] == "tlog-proof" and payload["index"] == INDEX
    assert payload["leaf_hash"] == ref_leaf_hash(INDEX).hex() and payload["size"] == SIZE
    hex_hash, b64_hash = ref_leaf_hash(INDEX).hex(), base64.b64encode(ref_leaf_hash(INDEX)).decode()
    for leaf_hash in (hex_hash, b64_hash):
        args = ["tlog-proof", path, "--key", vkey(LOG), "--leaf-hash", leaf_hash]
        assert run(*args, "--origin", ORIGIN)[0] == 0
    code, out = run("tlog-proof", path, "--key", vkey(LOG), "--leaf-hash", hex_hash)
    assert code == 0 and f"leaf {INDEX} of {SIZE}" in out


def test_tlog_proof_extra_is_reported_but_not_trusted(tmp_path: Path) -> None:
    proof = TlogProof(
        index=INDEX,
        proof=tuple(ref_inclusion(INDEX, SIZE)),
        checkpoint_note=signed_by(LOG),
        extra=b"app data",
    )
    path = write(tmp_path, "proof", proof.to_text())
    args = ["tlog-proof", path, "--key", vkey(LOG), "--leaf-hash", ref_leaf_hash(INDEX).hex()]
    code, payload = run_json(*args)
    assert code == 0 and base64.b64decode(payload["extra"]) == b"app data"


def test_tlog_proof_tampered_hash_or_wrong_leaf_is_invalid(tmp_path: Path) -> None:
    hashes = ref_inclusion(INDEX, SIZE)
    hashes[1] = bytes([hashes[1][0] ^ 1]) + hashes[1][1:]
    tampered = write(tmp_path, "tampered", proof_text(proof=hashes))
    good = write(tmp_path, "proof", proof_text())
    leaf_hash = ref_leaf_hash(INDEX).hex()
    code, payload = run_json("tlog-proof", tampered, "--key", vkey(LOG), "--leaf-hash", leaf_hash)
    assert code == 1 and "expected" in payload["error"]
    wrong = ref_leaf_hash(INDEX + 1).hex()
    assert run("tlog-proof", good, "--key", vkey(LOG), "--leaf-hash", wrong)[0] == 1
    other_leaf = write(tmp_path, "leaf", b"another leaf")
    assert run("tlog-proof", good, "--key", vkey(LOG), "--leaf", other_leaf)[0] == 1
    moved = write(tmp_path, "moved", proof_text(index=INDEX + 1, proof=ref_inclusion(INDEX, SIZE)))
    assert run("tlog-proof", moved, "--key", vkey(LOG), "--leaf-hash", leaf_hash)[0] == 1


def test_tlog_proof_checks_the_checkpoint(tmp_path: Path) -> None:
    leaf_hash = ["--leaf-hash", ref_leaf_hash(INDEX).hex()]
    path = write(tmp_path, "proof", proof_text())
    assert run("tlog-proof", path, "--key", vkey(MIRROR), *leaf_hash)[0] == 1
    assert run("tlog-proof", path, "--key", vkey(LOG), "--origin", "x.example", *leaf_hash)[0] == 1
    bad = corrupt_signature(signed_by(LOG), ORIGIN)
    bad_path = write(tmp_path, "bad", proof_text(note=bad))
    assert run("tlog-proof", bad_path, "--key", vkey(LOG), *leaf_hash)[0] == 1


def test_tlog_proof_malformed_file_is_usage_error(tmp_path: Path) -> None:
    leaf_hash = ["--leaf-hash", ref_leaf_hash(INDEX).hex()]
    for name, text in [
        ("header", proof_text().replace("tlog-proof@v1", "tlog-proof@v2")),
        ("note", proof_text().split("\n\n")[0] + "\n\nnot a note\n"),
        ("index", proof_text().replace(f"index {INDEX}", "index 05")),
    ]:
        code, payload = run_json(
            "tlog-proof", write(tmp_path, name, text), "--key", vkey(LOG), *leaf_hash
        )
        assert code == 2, (name, payload)
        assert payload["valid"] is False and payload["check"] == "tlog-proof"


def test_tlog_proof_needs_exactly_one_leaf_option(tmp_path: Path) -> None:
    path = write(tmp_path, "proof", proof_text())
    leaf = write(tmp_path, "leaf", leaf_data(INDEX))
    both = ["--leaf", leaf, "--leaf-hash", ref_leaf_hash(INDEX).hex()]
    code, payload = run_json("tlog-proof", path, "--key", vkey(LOG), *both)
    assert code == 2 and "exactly one of --leaf" in payload["error"]
    code, out = run("tlog-proof", path, "--key", vkey(LOG))
    assert code == 2 and "exactly one of --leaf" in out
    code, _ = run("tlog-proof", path, "--key", vkey(LOG), "--leaf-hash", "zz-not-a-hash")
    assert code == 2


# --- subprocess ---------------------------------------------------------------------------------


def test_real_subprocess_and_no_grpc_or_rocksdict_import(tmp_path: Path) -> None:
    """Both subcommands run in a fresh interpreter without importing grpc or rocksdict."""
    probe = OFFLINE_PROBE
    proof = write(tmp_path, "proof", proof_text())
    for args, stdin in [
        (["checkpoint", "-", "--key", vkey(LOG), "--origin", ORIGIN], signed_by(LOG)),
        (["tlog-proof", proof, "--key", vkey(LOG), "--leaf-hash", ref_leaf_hash(INDEX).hex()], ""),
    ]:
        proc = processes.run(
            [sys.executable, "-c", probe, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "IMPORTED []" in proc.stdout
        assert proc.stdout.startswith("OK: ")
