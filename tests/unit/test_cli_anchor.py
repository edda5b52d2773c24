"""``ledger-verify anchor``: RFC 3161 tokens over checkpoint bodies, via CliRunner and a subprocess.

Tokens come from the project's embedded TSA (``ledger.tsa.TsaAuthority``) and, when ``openssl``
is installed, from ``openssl ts -reply`` (``tests.tsa_openssl``), a TSA the project did not write.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.core.checkpoint import Checkpoint, CosignatureSigner, Ed25519Signer, add_signatures
from ledger.core.checkpoint import sign_checkpoint as sign
from ledger.timestamp.rfc3161 import build_request, imprint_for_checkpoint_body, token_from_response
from ledger.tsa.client import TSA_POLICY_OID, TsaAuthority
from ledger_client.cli.main import main
from tests import processes
from tests.offline import OFFLINE_PROBE
from tests.tsa_openssl import OPENSSL, OPENSSL_POLICY, make_pki, openssl_tsa, pem

ORIGIN = "ledger.example.com/agents/2026"
CHECKPOINT = Checkpoint(origin=ORIGIN, size=42, root_hash=hashlib.sha256(b"root").digest())
OTHER = Checkpoint(origin=ORIGIN, size=43, root_hash=hashlib.sha256(b"other").digest())
LOG = Ed25519Signer.generate(ORIGIN)
NOTE = sign(CHECKPOINT, LOG)
_FILE_NUMBERS = itertools.count()


@pytest.fixture(scope="module")
def tsa() -> TsaAuthority:
    return TsaAuthority.generate("Test TSA")


def stamp(tsa: TsaAuthority, data: bytes, *, body: bool = True) -> bytes:
    """A DER TimeStampResp over SHA-256 of ``data``."""
    digest = imprint_for_checkpoint_body(data) if body else hashlib.sha256(data).digest()
    return tsa.respond(build_request(digest).der)


def write(tmp_path: Path, name: str, data: str | bytes) -> str:
    """Write a fresh file (earlier argument lists keep pointing at their own files)."""
    path = tmp_path / f"{next(_FILE_NUMBERS)}-{name}"
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return str(path)


def anchor_args(tmp_path: Path, note: str | bytes, token: bytes, root: bytes) -> list[str]:
    return [
        "anchor",
        "--checkpoint",
        write(tmp_path, "checkpoint", note),
        "--token",
        write(tmp_path, "token", token),
        "--tsa-root",
        write(tmp_path, "root.pem", root),
    ]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, out = run(*args, "--json")
    payload: dict[str, Any] = json.loads(out)
    return code, payload


def test_anchor_of_a_checkpoint_body_is_valid(tmp_path: Path, tsa: TsaAuthority) -> None:
    response = stamp(tsa, CHECKPOINT.body_bytes())
    code, payload = run_json(*anchor_args(tmp_path, NOTE, response, tsa.root_pem()))
    assert code == 0, payload
    assert payload["valid"] is True and payload["check"] == "anchor"
    assert payload["imprint"] == hashlib.sha256(CHECKPOINT.body_bytes()).hexdigest()
    assert payload["origin"] == ORIGIN and payload["size"] == 42
    assert payload["signer_subject"] == "CN=Test TSA"
    assert payload["chain"] == ["CN=Test TSA", "CN=Test TSA Root"]
    assert payload["policy"] == TSA_POLICY_OID
    assert payload["gen_time"].endswith("Z") and int(payload["serial_number"]) > 0
    assert payload["signature_checked"] is False


def test_human_output(tmp_path: Path, tsa: TsaAuthority) -> None:
    response = stamp(tsa, CHECKPOINT.body_bytes())
    code, out = run(*anchor_args(tmp_path, NOTE, response, tsa.root_pem()))
    assert code == 0, out
    for label in ("gen time:", "TSA name:", "signer:      CN=Test TSA", "serial:", "policy:"):
        assert label in out
    assert "not checked" in out


def test_token_forms_bare_response_and_base64(tmp_path: Path, tsa: TsaAuthority) -> None:
    response = stamp(tsa, CHECKPOINT.body_bytes())
    token = token_from_response(response)
    for name, form in [
        ("bare token", token),
        ("base64 response", base64.b64encode(response)),
        ("wrapped base64 token", textwrap.fill(base64.b64encode(token).decode(), 64).encode()),
    ]:
        code, out = run(*anchor_args(tmp_path, NOTE, form, tsa.root_pem()))
        assert code == 0, (name, out)


def test_bare_body_and_cosigned_note_have_the_same_imprint(
    tmp_path: Path, tsa: TsaAuthority
) -> None:
    response = stamp(tsa, CHECKPOINT.body_bytes())
    body = CHECKPOINT.to_text()
    assert run(*anchor_args(tmp_path, body, response, tsa.root_pem()))[0] == 0
    witness = CosignatureSigner.generate("witness.example.com")
    cosigned = add_signatures(NOTE, [witness.cosign(CHECKPOINT, 1_767_225_600)])
    assert run(*anchor_args(tmp_path, cosigned, response, tsa.root_pem()))[0] == 0


def test_key_checks_the_checkpoint_signature(tmp_path: Path, tsa: TsaAuthority) -> None:
    args = anchor_args(tmp_path, NOTE, stamp(tsa, CHECKPOINT.body_bytes()), tsa.root_pem())
    code, payload = run_json(*args, "--key", LOG.verifier().key_string())
    assert code == 0, payload
    assert payload["signature_checked"] is True
    assert payload["signed_by"] == [f"{ORIGIN}+{LOG.key_id.hex()}"]
    stranger = Ed25519Signer.generate("stranger.example.com").verifier().key_string()
    code, payload = run_json(*args, "--key", stranger)
    assert code == 1 and "no signature by a trusted log key" in payload["error"]
    assert "failed_check" not in payload
    assert run(*args, "--key", "not-a-key")[0] == 2
    body = CHECKPOINT.to_text()
    body_args = anchor_args(tmp_path, body, stamp(tsa, CHECKPOINT.body_bytes()), tsa.root_pem())
    assert run(*body_args, "--key", LOG.verifier().key_string())[0] == 2  # no signatures


def test_token_for_another_checkpoint_fails_imprint(tmp_path: Path, tsa: TsaAuthority) -> None:
    response = stamp(tsa, OTHER.body_bytes())
    code, payload = run_json(*anchor_args(tmp_path, NOTE, response, tsa.root_pem()))
    assert code == 1
    assert payload["valid"] is False and payload["failed_check"] == "imprint"
    code, out = run(*anchor_args(tmp_path, NOTE, response, tsa.root_pem()))
    assert code == 1 and "INVALID: imprint:" in out


def test_token_over_the_whole_note_fails_imprint(tmp_path: Path, tsa: TsaAuthority) -> None:
    response = stamp(tsa, NOTE.encode(), body=False)
    code, payload = run_json(*anchor_args(tmp_path, NOTE, response, tsa.root_pem()))
    assert code == 1 and payload["failed_check"] == "imprint"


def test_untrusted_root_fails_chain(tmp_path: Path, tsa: TsaAuthority) -> None:
    response = stamp(tsa, CHECKPOINT.body_bytes())
    stranger = TsaAuthority.generate("Other TSA").root_pem()
    code, payload = run_json(*anchor_args(tmp_path, NOTE, response, stranger))
    assert code == 1 and payload["failed_check"] == "chain"
    bundle = stranger + tsa.root_pem()  # a PEM file may hold several roots
    assert run(*anchor_args(tmp_path, NOTE, response, bundle))[0] == 0


def test_rejected_response_fails_status(tmp_path: Path, tsa: TsaAuthority) -> None:
    rejection = tsa.respond(b"not a request")
    code, payload = run_json(*anchor_args(tmp_path, NOTE, rejection, tsa.root_pem()))
    assert code == 1 and payload["failed_check"] == "status"


def test_intermediate_certificates(tmp_path: Path) -> None:
    pki = make_pki(intermediate=True)
    tsa = TsaAuthority(root_cert=pki.root_cert, tsa_cert=pki.tsa_cert, tsa_key=pki.tsa_key)
    args = anchor_args(tmp_path, NOTE, stamp(tsa, CHECKPOINT.body_bytes()), pem(pki.root_cert))
    code, payload = run_json(*args)
    assert code == 1 and payload["failed_check"] == "chain"
    intermediate = write(tmp_path, "mid.pem", pem(pki.intermediates[0]))
    code, payload = run_json(*args, "--tsa-intermediate", intermediate)
    assert code == 0, payload
    assert len(payload["chain"]) == 3


@pytest.mark.parametrize(
    ("what", "complaint"),
    [
        ("token", "neither DER nor base64"),
        ("der-token", "not DER"),
        ("root", "not a PEM or DER certificate"),
        ("checkpoint", "checkpoint"),
    ],
)
def test_garbage_inputs_are_usage_errors(
    tmp_path: Path, tsa: TsaAuthority, what: str, complaint: str
) -> None:
    note: str | bytes = "garbage\n" if what == "checkpoint" else NOTE
    token = stamp(tsa, CHECKPOINT.body_bytes())
    token = {"token": b"garbage!", "der-token": b"\x30\x82\xff"}.get(what, token)
    root = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    code, payload = run_json(
        *anchor_args(tmp_path, note, token, root if what == "root" else tsa.root_pem())
    )
    assert code == 2, payload
    assert complaint in payload["error"]


def test_missing_options_are_usage_errors(tmp_path: Path, tsa: TsaAuthority) -> None:
    args = anchor_args(tmp_path, NOTE, stamp(tsa, CHECKPOINT.body_bytes()), tsa.root_pem())
    assert run(*args[:5])[0] == 2  # no --tsa-root
    assert run(*args[:1], *args[3:])[0] == 2  # no --checkpoint


@pytest.mark.skipif(OPENSSL is None, reason="openssl is not installed")
@pytest.mark.parametrize("ess_cert_id_alg", ["sha256", "sha1"])
def test_openssl_made_token(tmp_path: Path, ess_cert_id_alg: str) -> None:
    """A token from ``openssl ts -reply`` (RSA, ESSCertIDv2 or v1) verifies like ours."""
    request = build_request(imprint_for_checkpoint_body(CHECKPOINT.body_bytes()))
    with openssl_tsa(tmp_path, ess_cert_id_alg=ess_cert_id_alg) as (url, root, _tsa_cert):
        post = urllib.request.Request(
            url, data=request.der, headers={"Content-Type": "application/timestamp-query"}
        )
        with urllib.request.urlopen(post, timeout=30) as reply:
            response: bytes = reply.read()
    code, payload = run_json(*anchor_args(tmp_path, NOTE, response, root))
    assert code == 0, payload
    assert payload["policy"] == OPENSSL_POLICY and payload["signer_subject"] == "CN=OpenSSL TSA"
    other = anchor_args(tmp_path, sign(OTHER, LOG), response, root)
    assert run_json(*other)[1]["failed_check"] == "imprint"


def test_real_subprocess_and_no_grpc_or_rocksdict_import(tmp_path: Path, tsa: TsaAuthority) -> None:
    """The anchor check runs in a fresh interpreter without importing grpc or rocksdict."""
    probe = OFFLINE_PROBE
    args = anchor_args(tmp_path, NOTE, stamp(tsa, CHECKPOINT.body_bytes()), tsa.root_pem())
    proc = processes.run(
        [sys.executable, "-c", probe, *args, "--key", LOG.verifier().key_string()],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK: anchor verified")
    assert "IMPORTED []" in proc.stdout
