"""Tests for ``ledger.core.checkpoint``: C2SP signed notes, checkpoints, keys and cosignatures.

Real-world vectors (each verified here byte for byte):

* golang.org/x/mod ``sumdb/note/note_test.go``: the PeterNeumann / EnochRoot keys and signatures.
* c2sp.org/signed-note v1.1.0 "Verifier keys" example (``example.com/foo+530d903a``), as quoted
  by florolf/tlog-scales ``tests/test_signing.py``.
* sum.golang.org signed tree heads (origin ``go.sum database tree``, key name ``sum.golang.org``):
  size 31700353 from transparency-dev/tessera ``internal/parse/parse_test.go``; size 20852163,
  the signature in the c2sp.org/tlog-checkpoint example (whose origin line was edited there);
  size 65209736 from a "Go 1.27.1 lookup of golang.org/x/sync@v0.1.0" test fixture.
* arche2025h1.staging.ct.transparency.dev checkpoint with four witness cosignatures, one by
  ``remora.n621.de`` (key in transparency-dev/formats ``note/note_cosigv1_test.go``), as quoted
  by florolf/tlog-scales ``tests/test_signing.py``.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.checkpoint import (
    MAX_SIGNATURES,
    Checkpoint,
    CosignatureSigner,
    CosignatureVerifier,
    Ed25519Signer,
    Ed25519Verifier,
    NoteSignature,
    SignedNote,
    Verifier,
    add_signatures,
    compute_key_id,
    open_checkpoint,
    sign_checkpoint,
    sign_note,
    verify_signatures,
)
from ledger.core.errors import (
    BoundsError,
    MalformedKeyError,
    MalformedNoteError,
    OriginMismatchError,
    SignatureError,
    WitnessError,
)

# --- vectors ------------------------------------------------------------------------------------

PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZ"
    "b6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33W"
    "Wd1RvMc+QQ=\n"
)
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2O"
    "NncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)
SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_NOTES = [
    "go.sum database tree\n31700353\nqINS1GRFhWHwdkUeqLEoP4yEMkTBBzxBkGwGQlVlVcs=\n\n"
    "— sum.golang.org Az3grnmrIUEDFqHzAElIQCPNoRFRAAdFo47fooyWKMHb89k11GJh5zHIfNCOBmwn/C3YI8oW9/C8D"
    "J87F61QqspBYwM=\n",
    "go.sum database tree\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
    "— sum.golang.org Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+z"
    "yWE+xeMcTOAYQ8=\n",
    "go.sum database tree\n65209736\n5+uGFjx6xBZG8ip1+wi77v+grwbhhukIrxEUS8PXvRo=\n\n"
    "— sum.golang.org Az3grnbssgK7ubgFX36gVETtNv0U23qxyAhAMai2QUfeGa3nB/akvkMdlUErfcZz7l/R3cVtYspg3"
    "dxXABkGZZKdsQ8=\n",
]
ARCHE_VKEY = (
    "arche2025h1.staging.ct.transparency.dev+ba2f06c0+AU0vHmlGCS/PdN8b2OaGmKprLI8HKM+dJ472xgFYh15f"
)
REMORA_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
ARCHE_NOTE = """arche2025h1.staging.ct.transparency.dev
1432088532
U7WM79jrzyhGZ5/GUBTpM7NzwdyfFx61t3RovgcC4Ro=

— arche2025h1.staging.ct.transparency.dev zTM8sQAAAZ5W0WdjBAMARjBEAiBjW5IQf9pvsYLfQFX6hoGREPMHbdQ3urbllzalApkptQIgIpwtEroeW2BXaHAI4kJXFbon5Ch9MNL5zRNZ55lvGt0=
— arche2025h1.staging.ct.transparency.dev ui8GwCF1+kWqZrxGdhj4aX3gcw7XUlXQQabg/27lefwhUkzbC3NygNI75MdhL1bfTW9g8Ei59RA23oHP7Ry1k3ZFWwQ=
— transparency.dev/DEV:witness-little-garden 2AQqhwAAAABqEiEgzgFIqqhbUoDwjMWE6UP8nd8/KYTzwZ2rhIgcqoXHAwVkjZr4AscylP3v7sEodkRAErumC2q44vdgJY096st5BQ==
— witness1.smartit.nu/witness1 pIyCDwAAAABqEiEghIp82KWebrw7/oHQwlTAm3g2RKS4+eebl8eO0WH+/iEcxZ75W3u5hNI7TOQtmJbqmNWVuE0tgh0XwzdZsDsUAQ==
— remora.n621.de 2net5wAAAABqEiEgPlfF3V06o0Y+fHM+J5J9s27wgxxcOVSpZ/2g/KSiXCg9DEZI+aVCIobWX9sXTynk5XeU/zZ0WBxtqB0DrAWfBw==
— witness.stagemole.eu Z/euoAAAAABqEiEgw0i+7g2ENfDAWHmtRzCfKTHSDwYDJA2NmKeGi9Y8FtEyOUvVr+AJmIY/2TUFucgKi7lI7cUiOvKFYe/TmN9DAg==
"""  # noqa: E501
ARCHE_REMORA_TIME = 1779573024

ORIGIN = "ledger.example.com/agents/2026"
ROOT = hashlib.sha256(b"root").digest()
T0 = 1_790_000_000
B64ROOT = base64.b64encode(ROOT).decode()
URLSAFE = base64.urlsafe_b64encode(b"\xff" * 32).decode()


def checkpoint(size: int = 7, origin: str = ORIGIN) -> Checkpoint:
    """A valid checkpoint for tests."""
    return Checkpoint(origin=origin, size=size, root_hash=ROOT)


def signer(name: str = ORIGIN) -> Ed25519Signer:
    """A deterministic log signer for tests (seed derived from the name)."""
    return Ed25519Signer(name=name, seed=hashlib.sha256(name.encode()).digest())


def witness(name: str) -> CosignatureSigner:
    """A deterministic witness for tests (seed derived from the name)."""
    return CosignatureSigner(name=name, seed=hashlib.sha256(b"w" + name.encode()).digest())


def flip(sig: NoteSignature, at: int = -1) -> NoteSignature:
    """The same line with one signature bit flipped."""
    raw = bytearray(sig.signature)
    raw[at] ^= 1
    return dataclasses.replace(sig, signature=bytes(raw))


# --- checkpoint body ----------------------------------------------------------------------------


def test_checkpoint_text_layout() -> None:
    cp = Checkpoint(origin=ORIGIN, size=0, root_hash=bytes(32), extensions=("ext a",))
    want = f"{ORIGIN}\n0\n{'A' * 43}=\next a\n"
    assert cp.to_text() == want
    assert cp.body_bytes() == want.encode()
    assert Checkpoint.from_text(want) == cp


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"\n7\n{B64ROOT}\n", "origin line is empty"),
        (f" {ORIGIN}\n7\n{B64ROOT}\n", "leading/trailing whitespace"),
        (f"{ORIGIN} \n7\n{B64ROOT}\n", "leading/trailing whitespace"),
        (f"a\u00a0b\n7\n{B64ROOT}\n", "other than U\\+0020"),
        (f"a\tb\n7\n{B64ROOT}\n", "U\\+0009"),
        (f"{ORIGIN}\n07\n{B64ROOT}\n", "leading zeros"),
        (f"{ORIGIN}\n-7\n{B64ROOT}\n", "leading zeros"),
        (f"{ORIGIN}\n+7\n{B64ROOT}\n", "leading zeros"),
        (f"{ORIGIN}\n7.0\n{B64ROOT}\n", "ASCII decimal"),
        (f"{ORIGIN}\n\u0667\n{B64ROOT}\n", "ASCII decimal"),
        (f"{ORIGIN}\n{'9' * 5000}\n{B64ROOT}\n", "ASCII decimal"),
        (f"{ORIGIN}\n{2**64}\n{B64ROOT}\n", "0..2\\^64-1"),
        (f"{ORIGIN}\n7\n{base64.b64encode(ROOT[:31]).decode()}\n", "base64 of 32 bytes"),
        (f"{ORIGIN}\n7\n{B64ROOT[:-1]}\n", "base64 of 32 bytes"),
        (f"{ORIGIN}\n7\n{URLSAFE}\n", "base64"),
        (f"{ORIGIN}\n7\n{B64ROOT}", "does not end with a newline"),
        (f"{ORIGIN}\n7\n", "origin, tree size and root hash are required"),
        (f"{ORIGIN}\n7\n{B64ROOT}\n\n", "extension line 1 is empty"),
        (f"{ORIGIN}\n7\n{B64ROOT}\na\n\nb\n", "extension line 2"),
        (f"{ORIGIN}\r\n7\n{B64ROOT}\n", "U\\+000D"),
    ],
)
def test_malformed_checkpoint_text_is_rejected_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(MalformedNoteError, match=message):
        Checkpoint.from_text(text)


def test_non_canonical_root_base64_is_rejected() -> None:
    encoded = B64ROOT
    last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".index(encoded[-2])
    sloppy = encoded[:-2] + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[last ^ 1] + "="
    assert base64.b64decode(sloppy) == ROOT  # lenient decoders accept it
    with pytest.raises(MalformedNoteError, match=r"canonical"):
        Checkpoint.from_text(f"{ORIGIN}\n7\n{sloppy}\n")


def test_checkpoint_constructor_validates() -> None:
    with pytest.raises(MalformedNoteError, match=r"32"):
        Checkpoint(origin=ORIGIN, size=1, root_hash=b"short")
    with pytest.raises(MalformedNoteError, match=r"0..2\^64-1"):
        Checkpoint(origin=ORIGIN, size=-1, root_hash=ROOT)
    with pytest.raises(MalformedNoteError, match=r"newline"):
        Checkpoint(origin=ORIGIN, size=1, root_hash=ROOT, extensions=("a\nb",))


ORIGIN_CHARS = st.characters(exclude_categories=("Cs", "Cc", "Z")) | st.just(" ")
LINE_CHARS = st.characters(exclude_categories=("Cs", "Cc"))
origins = st.text(ORIGIN_CHARS, min_size=1, max_size=40).filter(lambda s: s == s.strip())
checkpoints = st.builds(
    Checkpoint,
    origin=origins,
    size=st.integers(0, 2**64 - 1),
    root_hash=st.binary(min_size=32, max_size=32),
    extensions=st.lists(st.text(LINE_CHARS, min_size=1, max_size=20), max_size=3).map(tuple),
)


@given(checkpoints)
def test_checkpoint_text_round_trip(cp: Checkpoint) -> None:
    text = cp.to_text()
    assert Checkpoint.from_text(text) == cp
    assert Checkpoint.from_text(text).to_text() == text


# --- signed notes -------------------------------------------------------------------------------

names = st.text(
    st.characters(exclude_categories=("Cs", "Cc", "Z"), exclude_characters="+"), min_size=1
).filter(lambda s: not any(c.isspace() for c in s))
note_signatures = st.builds(
    NoteSignature,
    name=names,
    key_id=st.binary(min_size=4, max_size=4),
    signature=st.binary(min_size=1, max_size=80),
)
notes = st.builds(
    SignedNote,
    text=st.text(LINE_CHARS | st.just("\n"), max_size=60).map(lambda s: s + "\n"),
    signatures=st.lists(note_signatures, min_size=1, max_size=20).map(tuple),
)


@given(notes)
def test_signed_note_round_trip(note: SignedNote) -> None:
    text = note.to_text()
    assert SignedNote.from_text(text) == note
    assert SignedNote.from_bytes(text.encode()) == note


@given(note_signatures)
def test_signature_line_round_trip(sig: NoteSignature) -> None:
    assert NoteSignature.from_line(sig.to_line()) == sig


def test_note_text_is_split_at_the_last_blank_line() -> None:
    note = SignedNote.from_text("a\n\nb\n\n\n" + PETER_SIG)
    assert note.text == "a\n\nb\n\n"
    assert note.to_text() == "a\n\nb\n\n\n" + PETER_SIG


@pytest.mark.parametrize(
    ("note", "message"),
    [
        (GO_TEXT, "no blank line"),
        (GO_TEXT + "\n", "no signature lines"),
        (GO_TEXT + "\n" + PETER_SIG[:-1], "does not end with a newline"),
        ("\x01" + GO_TEXT + "\n" + PETER_SIG, "U\\+0001"),
        ("\ud800" + GO_TEXT + "\n" + PETER_SIG, "U\\+D800"),
        (GO_TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Bad Name"), "canonical"),
        (GO_TEXT + "\n" + PETER_SIG + "Unexpected line.\n", "does not start with '— '"),
        (GO_TEXT + "\n" + PETER_SIG.replace("— ", "- "), "does not start with '— '"),
        (GO_TEXT + "\n— PeterNeumann\n", "no space after the name"),
        (GO_TEXT + "\n— PeterNeumann \n", "5\\+"),
        (GO_TEXT + "\n— PeterNeumann AAAAAA==\n", "decodes to 4 bytes"),
        (GO_TEXT + "\n— PeterNeumann AAAA!AAA\n", "canonical standard base64"),
        (GO_TEXT + "\n— Peter+Neumann AAAAAAA=\n", "'\\+'"),
        (GO_TEXT + "\n—  AAAAAAA=\n", "key name '' is empty"),
        (GO_TEXT + "\n— a\u2003b AAAAAAA=\n", "spaces"),
        (GO_TEXT + "\n" + PETER_SIG * (MAX_SIGNATURES + 1), "101 signature lines"),
        (GO_TEXT.replace("\n", "\r\n") + "\r\n" + PETER_SIG, "U\\+000D"),
    ],
)
def test_malformed_notes_are_rejected_with_a_reason(note: str, message: str) -> None:
    with pytest.raises(MalformedNoteError, match=message):
        SignedNote.from_text(note)


def test_non_utf8_note_is_rejected() -> None:
    with pytest.raises(MalformedNoteError, match=r"not UTF-8 \(byte 0\)"):
        SignedNote.from_bytes(b"\xff" + (GO_TEXT + "\n" + PETER_SIG).encode())


def test_note_constructor_validates() -> None:
    sig = SignedNote.from_text(GO_TEXT + "\n" + PETER_SIG).signatures[0]
    with pytest.raises(MalformedNoteError, match=r"does not end with a newline"):
        SignedNote(text="abc", signatures=(sig,))
    with pytest.raises(MalformedNoteError, match=r"0 signature lines"):
        SignedNote(text=GO_TEXT, signatures=())
    with pytest.raises(MalformedNoteError, match=r"key ID is 3 bytes"):
        NoteSignature(name="a", key_id=b"abc", signature=b"x")
    with pytest.raises(MalformedNoteError, match=r"empty"):
        NoteSignature(name="a", key_id=b"abcd", signature=b"")


# --- keys: real vectors -------------------------------------------------------------------------


def test_go_sumdb_note_vectors() -> None:
    peter = Ed25519Verifier.from_key_string(PETER_VKEY)
    enoch = Ed25519Verifier.from_key_string(ENOCH_VKEY)
    assert peter.key_id.hex() == "c74f20a3" and enoch.key_id.hex() == "af0cfe78"
    assert peter.key_string() == PETER_VKEY and enoch.key_string() == ENOCH_VKEY
    skey = Ed25519Signer.from_key_string(PETER_SKEY)
    assert skey.key_string() == PETER_SKEY
    assert skey.verifier() == peter
    # Ed25519 is deterministic: our signer reproduces Go's TestSign output byte for byte.
    assert sign_note(GO_TEXT, [skey]) == GO_TEXT + "\n" + PETER_SIG
    note = SignedNote.from_text(GO_TEXT + "\n" + PETER_SIG + ENOCH_SIG)
    assert [s.name for s in verify_signatures(note, [peter])] == ["PeterNeumann"]
    assert len(verify_signatures(note, [peter, enoch])) == 2
    assert verify_signatures(note, []) == ()


def test_c2sp_signed_note_example() -> None:
    key = Ed25519Verifier.from_key_string(C2SP_VKEY)
    assert (
        key.public_key.hex() == "e932791ae6e7a840a46164c904786426d5e7821dd8b29a00d61cae72afdd4da4"
    )
    assert compute_key_id("example.com/foo", 0x01, key.public_key).hex() == "530d903a"
    note = SignedNote.from_text(C2SP_NOTE)
    assert note.text == "This is an example message.\n"
    assert verify_signatures(note, [key]) == note.signatures
    assert note.to_text() == C2SP_NOTE


def test_every_mangled_go_key_is_rejected() -> None:
    for i in range(len(PETER_VKEY)):
        for j in range(i + 1, len(PETER_VKEY) + 1):
            if (i, j) != (0, len(PETER_VKEY)):
                with pytest.raises(MalformedKeyError):
                    Ed25519Verifier.from_key_string(PETER_VKEY[i:j])
        mangled = PETER_VKEY[:i] + chr(ord(PETER_VKEY[i]) + 1) + PETER_VKEY[i + 1 :]
        with pytest.raises(MalformedKeyError):
            Ed25519Verifier.from_key_string(mangled)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
            "not canonical base64",  # Go's wrong-length case; its padding bits are not zero
        ),
        (
            "PeterNeumann+e5f2e8cf+" + base64.b64encode(b"\x01" + bytes(33)).decode(),
            "33 bytes, Ed25519 needs 32",
        ),
        (
            "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "unsupported signature type 0x65 .*only Ed25519 \\(0x01\\)",
        ),
        (PETER_VKEY.replace("+ARpc", "+AhpC"), "unsupported signature type 0x02"),
        (PETER_VKEY.replace("+ARpc", "+BBpc"), "unsupported signature type 0x04"),
        (PETER_VKEY.replace("c74f20a3", "c74f20a4"), "key ID mismatch.*c74f20a4.*c74f20a3"),
        (PETER_VKEY.replace("c74f20a3", "c74f20"), "not 8 hex digits"),
        (PETER_VKEY.replace("c74f20a3", "c74f20ag"), "not 8 hex digits"),
        ("PeterNeumann+c74f20a3", "name\\+hexid\\+base64key"),
        ("+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "key name '' is empty"),
        ("PeterNeumann+c74f20a3+", "empty or not canonical base64"),
        # The sum.golang.org key as misquoted in the brief: the ID check catches the typo.
        ("sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ze6cQ/ylmCrmnvpG", "mismatch"),
    ],
)
def test_bad_verifier_keys_are_rejected_with_a_reason(key: str, message: str) -> None:
    with pytest.raises(MalformedKeyError, match=message):
        Ed25519Verifier.from_key_string(key)


def test_bad_signer_keys_are_rejected_with_a_reason() -> None:
    # The PeterNeumann signer key as misquoted in the brief: its seed does not hash to c74f20a3.
    wrong = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxEXUAbCd"
    with pytest.raises(MalformedKeyError, match=r"key ID mismatch"):
        Ed25519Signer.from_key_string(wrong)
    with pytest.raises(MalformedKeyError, match=r"must start with PRIVATE\+KEY\+"):
        Ed25519Signer.from_key_string(PETER_VKEY)
    with pytest.raises(MalformedKeyError, match=r"only Ed25519 \(0x01\)"):
        Ed25519Signer.from_key_string(witness("w").key_string())
    with pytest.raises(MalformedKeyError, match=r"only Ed25519 cosignature/v1 \(0x04\)"):
        CosignatureSigner.from_key_string(PETER_SKEY)


def test_generated_keys_round_trip_and_hide_the_seed() -> None:
    for cls in (Ed25519Signer, CosignatureSigner):
        key = cls.generate("example.com/k")
        assert cls.from_key_string(key.key_string()) == key
        assert key.seed.hex() not in repr(key)
        assert type(key.verifier()).from_key_string(key.verifier().key_string()) == key.verifier()


def test_key_id_derivation_uses_the_type_byte() -> None:
    log, wit = signer("k"), CosignatureSigner(name="k", seed=signer("k").seed)
    pub = log.public_key
    assert log.key_id == hashlib.sha256(b"k\n\x01" + pub).digest()[:4]
    assert wit.key_id == hashlib.sha256(b"k\n\x04" + pub).digest()[:4]
    assert wit.verifier().key_string().split("+", 2)[2] == base64.b64encode(b"\x04" + pub).decode()


# --- opening checkpoints ------------------------------------------------------------------------


def test_real_sum_golang_org_checkpoints_verify() -> None:
    key = Ed25519Verifier.from_key_string(SUMDB_VKEY)
    for note in SUMDB_NOTES:
        opened = open_checkpoint(note, [key], origin="go.sum database tree")
        assert opened.checkpoint.origin == "go.sum database tree"
        assert [s.name for s in opened.log_signatures] == ["sum.golang.org"]
        assert opened.note.to_text() == note
    assert open_checkpoint(SUMDB_NOTES[0], [key]).checkpoint.size == 31700353
    with pytest.raises(OriginMismatchError, match=r"go.sum database tree"):
        open_checkpoint(SUMDB_NOTES[0], [key], origin="sum.golang.org")
    with pytest.raises(SignatureError, match=r"sum.golang.org\+033de0ae"):
        open_checkpoint(SUMDB_NOTES[0].replace("31700353", "31700354"), [key])


def test_real_witnessed_checkpoint_verifies() -> None:
    log = Ed25519Verifier.from_key_string(ARCHE_VKEY)
    remora = CosignatureVerifier.from_key_string(REMORA_VKEY)
    opened = open_checkpoint(
        ARCHE_NOTE.encode(),
        [log],
        origin="arche2025h1.staging.ct.transparency.dev",
        witnesses=[remora],
        min_witnesses=1,
        now=ARCHE_REMORA_TIME,
    )
    assert opened.checkpoint.size == 1432088532
    # The RFC 6962 signature (type 0x05) shares the log's name but not its key ID: ignored.
    assert [s.key_id.hex() for s in opened.log_signatures] == ["ba2f06c0"]
    assert [(c.name, c.timestamp) for c in opened.cosignatures] == [
        ("remora.n621.de", ARCHE_REMORA_TIME)
    ]
    with pytest.raises(WitnessError, match=r"1 trusted witness\(es\).*2 required"):
        open_checkpoint(ARCHE_NOTE, [log], witnesses=[remora], min_witnesses=2)
    with pytest.raises(WitnessError, match=r"dated after now"):
        open_checkpoint(
            ARCHE_NOTE, [log], witnesses=[remora], min_witnesses=1, now=ARCHE_REMORA_TIME - 1
        )


def test_several_keys_sign_one_note() -> None:
    a, b, c = signer("a.example/log"), signer("b.example/log"), signer("c.example/log")
    note = sign_note(checkpoint().to_text(), [a, b, c])
    assert [s.name for s in SignedNote.from_text(note).signatures] == [
        "a.example/log",
        "b.example/log",
        "c.example/log",
    ]
    opened = open_checkpoint(note, [b.verifier(), c.verifier()], origin=ORIGIN)
    assert [s.name for s in opened.log_signatures] == ["b.example/log", "c.example/log"]


def test_unknown_keys_are_ignored_even_sharing_a_name_or_an_id() -> None:
    log = signer()
    cp = checkpoint()
    good = SignedNote.from_text(sign_checkpoint(cp, log)).signatures[0]
    same_name = NoteSignature(name=log.name, key_id=b"\0\0\0\0", signature=b"junk")
    same_id = NoteSignature(name="other.example", key_id=log.key_id, signature=b"junk")
    note = SignedNote(text=cp.to_text(), signatures=(same_name, good, same_id)).to_text()
    assert open_checkpoint(note, [log.verifier()]).log_signatures == (good,)


def test_sixteen_and_more_signature_lines_are_accepted() -> None:
    cp = checkpoint()
    strangers = [signer(f"stranger{i}.example") for i in range(15)]
    witnesses = [witness(f"w{i}.example") for i in range(4)]
    note = sign_note(cp.to_text(), [*strangers, signer()])
    note = add_signatures(note, [w.cosign(cp, T0) for w in witnesses])
    assert len(SignedNote.from_text(note).signatures) == 20
    opened = open_checkpoint(
        note, [signer().verifier()], witnesses=[w.verifier() for w in witnesses], min_witnesses=4
    )
    assert len(opened.cosignatures) == 4
    filler = [NoteSignature(name=f"x{i}", key_id=b"abcd", signature=b"s") for i in range(99)]
    full = add_signatures(note, filler[: MAX_SIGNATURES - 20])
    assert len(open_checkpoint(full, [signer().verifier()]).note.signatures) == MAX_SIGNATURES
    with pytest.raises(MalformedNoteError, match=r"1..100 accepted"):
        add_signatures(full, filler[80:81])


def test_a_known_keys_bad_signature_rejects_the_note() -> None:
    a, b = signer("a.example"), signer("b.example")
    note = SignedNote.from_text(sign_note(checkpoint().to_text(), [a, b]))
    broken = SignedNote(text=note.text, signatures=(note.signatures[0], flip(note.signatures[1])))
    with pytest.raises(SignatureError, match=r"invalid signature by known key b.example\+"):
        open_checkpoint(broken.to_text(), [a.verifier(), b.verifier()])
    assert open_checkpoint(broken.to_text(), [a.verifier()]).log_signatures  # b unknown: ignored
    twice = SignedNote(text=note.text, signatures=(note.signatures[0], flip(note.signatures[0])))
    with pytest.raises(SignatureError):
        open_checkpoint(twice.to_text(), [a.verifier()])


def test_no_trusted_signature_is_rejected() -> None:
    note = sign_checkpoint(checkpoint(), signer())
    with pytest.raises(SignatureError, match=r"no signature by a trusted log key \(none given\)"):
        open_checkpoint(note, [])
    with pytest.raises(SignatureError, match=r"other.example"):
        open_checkpoint(note, [signer("other.example").verifier()])
    with pytest.raises(SignatureError, match=r"no signature by a trusted log key"):  # witness only
        open_checkpoint(note, [], witnesses=[witness("w").verifier()])


def test_wrong_origin_is_rejected_and_key_name_is_not_the_origin() -> None:
    log = signer("key-name.example")
    note = sign_checkpoint(checkpoint(origin="some origin"), log)
    assert open_checkpoint(note, [log.verifier()], origin="some origin").checkpoint.size == 7
    with pytest.raises(OriginMismatchError, match=r"'some origin' is not the expected"):
        open_checkpoint(note, [log.verifier()], origin=ORIGIN)


def test_a_signed_note_that_is_not_a_checkpoint_is_rejected() -> None:
    peter = Ed25519Verifier.from_key_string(PETER_VKEY)
    with pytest.raises(MalformedNoteError, match=r"origin, tree size and root hash"):
        open_checkpoint(GO_TEXT + "\n" + PETER_SIG, [peter])


def test_ambiguous_keys_are_rejected() -> None:
    key = signer().verifier()
    assert open_checkpoint(sign_checkpoint(checkpoint(), signer()), [key, key])
    impostor = Ed25519Verifier(name=key.name, public_key=bytes(32))

    class Colliding:
        name = key.name
        key_id = key.key_id

        def verify(self, message: bytes, signature: bytes) -> bool:
            return impostor.verify(message, signature)

    with pytest.raises(MalformedKeyError, match=r"ambiguous key"):
        open_checkpoint(sign_checkpoint(checkpoint(), signer()), [key, Colliding()])
    with pytest.raises(MalformedKeyError, match=r"ambiguous key"):
        open_checkpoint(sign_checkpoint(checkpoint(), signer()), [key], witnesses=[key])


def test_injected_verifier_protocol() -> None:
    class Always:
        name = ORIGIN
        key_id = b"1234"

        def verify(self, message: bytes, signature: bytes) -> bool:
            return signature == b"ok"

    verifier: Verifier = Always()
    note = SignedNote(
        text=checkpoint().to_text(),
        signatures=(NoteSignature(name=ORIGIN, key_id=b"1234", signature=b"ok"),),
    )
    assert open_checkpoint(note.to_text(), [verifier]).checkpoint == checkpoint()


# --- cosignatures -------------------------------------------------------------------------------


def test_cosignature_wire_format() -> None:
    w = witness("witness.example/w1")
    cp = checkpoint()
    sig = w.cosign(cp, T0)
    assert sig.name == "witness.example/w1" and sig.key_id == w.key_id
    assert sig.signature[:8] == T0.to_bytes(8, "big") and len(sig.signature) == 72
    message = f"cosignature/v1\ntime {T0}\n".encode() + cp.body_bytes()
    Ed25519PublicKey.from_public_bytes(w.public_key).verify(sig.signature[8:], message)
    assert w.verifier().verify(cp.body_bytes(), sig.signature)
    assert not w.verifier().verify(cp.body_bytes(), sig.signature[:71])
    assert not Ed25519Verifier(name=w.name, public_key=w.public_key).verify(
        cp.body_bytes(), sig.signature[8:]
    )


def test_cosignature_timestamp_bounds() -> None:
    w = witness("w")
    with pytest.raises(BoundsError, match=r"0..2\^63-1"):
        w.cosign(checkpoint(), 2**63)
    with pytest.raises(BoundsError):
        w.cosign(checkpoint(), -1)
    too_late = (2**63).to_bytes(8, "big") + w.cosign(checkpoint(), 0).signature[8:]
    assert not w.verifier().verify(checkpoint().body_bytes(), too_late)


def witnessed(count: int, cp: Checkpoint | None = None) -> tuple[str, list[CosignatureSigner]]:
    """A log-signed checkpoint note cosigned by ``count`` witnesses at T0 + i."""
    cp = cp or checkpoint()
    wits = [witness(f"w{i}.example") for i in range(count)]
    note = add_signatures(
        sign_checkpoint(cp, signer()), [w.cosign(cp, T0 + i) for i, w in enumerate(wits)]
    )
    return note, wits


def test_valid_cosignatures_meet_the_quorum() -> None:
    note, wits = witnessed(3)
    opened = open_checkpoint(
        note, [signer().verifier()], witnesses=[w.verifier() for w in wits], min_witnesses=3
    )
    assert [(c.name, c.timestamp) for c in opened.cosignatures] == [
        ("w0.example", T0),
        ("w1.example", T0 + 1),
        ("w2.example", T0 + 2),
    ]


def test_too_few_cosignatures_are_rejected() -> None:
    note, wits = witnessed(2)
    keys = [w.verifier() for w in wits] + [witness("silent.example").verifier()]
    with pytest.raises(WitnessError, match=r"2 trusted witness\(es\) cosigned validly, 3 required"):
        open_checkpoint(note, [signer().verifier()], witnesses=keys, min_witnesses=3)
    repeated = add_signatures(note, [wits[0].cosign(checkpoint(), T0 + 9)])  # replaces, no double
    with pytest.raises(WitnessError):
        open_checkpoint(repeated, [signer().verifier()], witnesses=keys, min_witnesses=3)


def test_invalid_cosignature_by_a_known_witness_is_rejected() -> None:
    note, wits = witnessed(2)
    parsed = SignedNote.from_text(note)
    bad = SignedNote(
        text=parsed.text, signatures=(*parsed.signatures[:2], flip(parsed.signatures[2]))
    )
    keys = [w.verifier() for w in wits]
    with pytest.raises(SignatureError, match=r"w1.example"):
        open_checkpoint(bad.to_text(), [signer().verifier()], witnesses=keys)
    other_cp = checkpoint(size=8)  # a cosignature of another checkpoint
    moved = add_signatures(note, [wits[0].cosign(other_cp, T0)])
    with pytest.raises(SignatureError, match=r"w0.example"):
        open_checkpoint(moved, [signer().verifier()], witnesses=keys)
    timestamp_edited = bytearray(wits[0].cosign(checkpoint(), T0).signature)
    timestamp_edited[7] ^= 1
    edited = add_signatures(
        note,
        [
            NoteSignature(
                name="w0.example", key_id=wits[0].key_id, signature=bytes(timestamp_edited)
            )
        ],
    )
    with pytest.raises(SignatureError):
        open_checkpoint(edited, [signer().verifier()], witnesses=keys)


def test_future_cosignatures_do_not_count() -> None:
    note, wits = witnessed(2)
    keys = [w.verifier() for w in wits]
    opened = open_checkpoint(note, [signer().verifier()], witnesses=keys, now=T0)
    assert [c.name for c in opened.cosignatures] == ["w0.example"]
    with pytest.raises(WitnessError, match=r"1 cosignature\(s\) dated after now=1790000000"):
        open_checkpoint(note, [signer().verifier()], witnesses=keys, min_witnesses=2, now=T0)


def test_add_signatures_replaces_a_keys_earlier_line() -> None:
    cp = checkpoint()
    w = witness("w.example")
    note = add_signatures(sign_checkpoint(cp, signer()), [w.cosign(cp, T0)])
    again = add_signatures(note, [w.cosign(cp, T0 + 60)])
    sigs = SignedNote.from_text(again).signatures
    assert len(sigs) == 2 and sigs[1].signature[:8] == (T0 + 60).to_bytes(8, "big")
    assert SignedNote.from_text(again).text == cp.to_text()
