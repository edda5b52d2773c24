"""Tests for ``ledger.core.tlogproof``: the c2sp.org/tlog-proof@v1 text format."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.checkpoint import Checkpoint, Ed25519Signer, Ed25519Verifier, open_checkpoint
from ledger.core.checkpoint import sign_checkpoint as sign
from ledger.core.errors import MalformedProofFileError
from ledger.core.tlogproof import HEADER, MAX_PROOF_HASHES, TlogProof

# The proof lines of the c2sp.org/tlog-proof example (its checkpoint signatures are elided there,
# so a real sum.golang.org checkpoint note stands in for it).
SPEC_HEAD = """c2sp.org/tlog-proof@v1
extra YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6kYXJ3aW4tYXJ
index 73894
gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=
B95lDa8R83lS8n0eG+o0buTxRKQTYFi//1U8anccXmA=
EKNzoDWG8LGC0Yp9o+sv3qllpMP9uHQ9B20KNL+Q1zs=
RoopEkOdqkYqMB4MJXrbt/hMjOxsVn0IrWjpz1ZMMes=
AHCioX9nLjsrse6YhjRRmk1WUEirVOLLRoOQ6vfO5vk=
"""
SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_NOTE = (
    "go.sum database tree\n31700353\nqINS1GRFhWHwdkUeqLEoP4yEMkTBBzxBkGwGQlVlVcs=\n\n"
    "— sum.golang.org Az3grnmrIUEDFqHzAElIQCPNoRFRAAdFo47fooyWKMHb89k11GJh5zHIfNCOBmwn/C3YI8oW9/C8D"
    "J87F61QqspBYwM=\n"
)
SIGNER = Ed25519Signer(name="ledger.example.com/log", seed=hashlib.sha256(b"log").digest())
NOTE = sign(Checkpoint(origin="ledger.example.com/log", size=9, root_hash=bytes(range(32))), SIGNER)
H = hashlib.sha256(b"h").digest()
B64H = base64.b64encode(H).decode()


def test_spec_example_lines_parse_and_round_trip() -> None:
    text = SPEC_HEAD + "\n" + SUMDB_NOTE
    proof = TlogProof.from_text(text)
    assert proof.index == 73894
    assert proof.extra is not None and proof.extra.startswith(b"age-v1.2.1-darwin-arm64.tar.gz")
    assert len(proof.proof) == 5 and proof.proof[0].hex().startswith("8122b25e")
    assert proof.checkpoint_note == SUMDB_NOTE
    assert proof.to_text() == text
    key = Ed25519Verifier.from_key_string(SUMDB_VKEY)
    assert open_checkpoint(proof.checkpoint_note, [key]).checkpoint.size == 31700353


def test_minimal_proof_layout() -> None:
    proof = TlogProof(index=0, proof=(), checkpoint_note=NOTE)
    assert proof.to_text() == f"{HEADER}\nindex 0\n\n{NOTE}"
    assert TlogProof.from_bytes(proof.to_text().encode()) == proof
    with_extra = TlogProof(index=5, proof=(H,), checkpoint_note=NOTE, extra=b"x")
    assert with_extra.to_text() == f"{HEADER}\nextra eA==\nindex 5\n{B64H}\n\n{NOTE}"


proofs = st.builds(
    TlogProof,
    index=st.integers(0, 2**64 - 1),
    proof=st.lists(st.binary(min_size=32, max_size=32), max_size=MAX_PROOF_HASHES).map(tuple),
    checkpoint_note=st.just(NOTE) | st.just(SUMDB_NOTE),
    extra=st.none() | st.binary(min_size=1, max_size=64),
)


@given(proofs)
def test_round_trip(proof: TlogProof) -> None:
    text = proof.to_text()
    assert TlogProof.from_text(text) == proof
    assert TlogProof.from_text(text).to_text() == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"index 0\n\n{NOTE}", "first line must be"),
        (f"c2sp.org/tlog-proof@v2\nindex 0\n\n{NOTE}", "first line must be"),
        (f"{HEADER}\r\nindex 0\n\n{NOTE}", "first line must be"),
        (f"{HEADER}\n\n{NOTE}", "missing 'index <n>' line"),
        (f"{HEADER}\nindex 0\n{NOTE}", "proof line 1 ..ledger.example.com/log.. is not"),
        (f"{HEADER}\nindex 0", "no empty line"),
        (f"{HEADER}\nindex 01\n\n{NOTE}", "without leading zeros"),
        (f"{HEADER}\nindex -1\n\n{NOTE}", "without leading zeros"),
        (f"{HEADER}\nindex 1e3\n\n{NOTE}", "decimal"),
        (f"{HEADER}\nindex {2**64}\n\n{NOTE}", "0..2\\^64-1"),
        (f"{HEADER}\nindex  1\n\n{NOTE}", "decimal"),
        (f"{HEADER}\nindex\n\n{NOTE}", "expected 'index <n>'"),
        (f"{HEADER}\n{B64H}\nindex 0\n\n{NOTE}", "expected 'index <n>'"),
        (f"{HEADER}\nindex 0\nextra eA==\n\n{NOTE}", "proof line 1"),
        (f"{HEADER}\nextra\nindex 0\n\n{NOTE}", "expected 'index <n>'"),
        (f"{HEADER}\nextra \nindex 0\n\n{NOTE}", "extra line is not"),
        (f"{HEADER}\nextra eA=\nindex 0\n\n{NOTE}", "extra line is not"),
        (f"{HEADER}\nextra eB==\nindex 0\n\n{NOTE}", "extra line is not"),  # non-canonical
        (f"{HEADER}\nindex 0\n{B64H[:-1]}\n\n{NOTE}", "proof line 1"),
        (f"{HEADER}\nindex 0\n{B64H}\n{base64.b64encode(H[:31]).decode()}\n\n{NOTE}", "line 2"),
        (f"{HEADER}\nindex 0\n{B64H} \n\n{NOTE}", "proof line 1"),
        (f"{HEADER}\nindex 0\n" + f"{B64H}\n" * 65 + f"\n{NOTE}", "65 proof hashes"),
        (f"{HEADER}\nindex 0\n\n{NOTE}\n", "embedded checkpoint: no signature lines"),
        (f"{HEADER}\nindex 0\n\nnot a note\n", "embedded checkpoint: no blank line"),
        (f"{HEADER}\nindex 0\n\n\n{NOTE}", "embedded checkpoint"),
        (f"{HEADER}\nindex 0\n\nhello\n\n{NOTE.splitlines()[-1]}\n", "embedded checkpoint: check"),
    ],
)
def test_malformed_proofs_are_rejected_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(MalformedProofFileError, match=message):
        TlogProof.from_text(text)


def test_non_utf8_proof_file_is_rejected() -> None:
    with pytest.raises(MalformedProofFileError, match="not UTF-8"):
        TlogProof.from_bytes(b"\xfe" + f"{HEADER}\nindex 0\n\n{NOTE}".encode())


def test_constructor_validates() -> None:
    with pytest.raises(MalformedProofFileError, match="outside"):
        TlogProof(index=-1, proof=(), checkpoint_note=NOTE)
    with pytest.raises(MalformedProofFileError, match="proof hash 2 is 31 bytes"):
        TlogProof(index=0, proof=(H, H[:31]), checkpoint_note=NOTE)
    with pytest.raises(MalformedProofFileError, match="use None"):
        TlogProof(index=0, proof=(), checkpoint_note=NOTE, extra=b"")
    with pytest.raises(MalformedProofFileError, match="65 proof hashes"):
        TlogProof(index=0, proof=(H,) * 65, checkpoint_note=NOTE)
    with pytest.raises(MalformedProofFileError, match="embedded checkpoint"):
        TlogProof(index=0, proof=(), checkpoint_note="x\n")
