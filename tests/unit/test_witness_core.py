"""The witness decision (c2sp.org/tlog-witness add-checkpoint): every status, evidence, parsing."""

from __future__ import annotations

import base64

import pytest

from ledger.core.checkpoint import CosignatureSigner, Ed25519Signer, open_checkpoint
from ledger.core.errors import FormatError
from ledger.core.note import add_signatures
from ledger.witness.core import (
    MAX_PROOF_LINES,
    SIZE_CONTENT_TYPE,
    Decision,
    LogRecord,
    build_request,
    decide,
    parse_request,
)
from tests import processes
from tests.witness_fixtures import ORIGIN, View, log_signer

NOW = 1_790_000_000


@pytest.fixture
def signer() -> Ed25519Signer:
    return log_signer()


@pytest.fixture
def cosigner() -> CosignatureSigner:
    return CosignatureSigner.generate("witness.test/w1")


def run(
    body: bytes,
    signer: Ed25519Signer,
    cosigner: CosignatureSigner,
    held: dict[str, LogRecord] | None = None,
) -> Decision:
    return decide(
        parse_request(body),
        logs={ORIGIN: [signer.verifier()]},
        held=held or {},
        signer=cosigner,
        now=NOW,
    )


def held_after(decision: Decision) -> dict[str, LogRecord]:
    assert decision.record is not None
    return {decision.record.origin: decision.record}


def test_first_checkpoint_is_cosigned_on_its_signature(
    signer: Ed25519Signer, cosigner: CosignatureSigner
) -> None:
    view = View(signer)
    view.grow(5)
    decision = run(view.request(0), signer, cosigner)
    assert decision.status == 200 and decision.evidence is None
    assert decision.record is not None and decision.record.size == 5
    note = add_signatures(view.log.checkpoint(0).note, [])
    cosigned = note.rstrip("\n") + "\n" + decision.body
    verified = open_checkpoint(
        cosigned, [signer.verifier()], witnesses=[cosigner.verifier()], min_witnesses=1
    )
    assert [(c.name, c.timestamp) for c in verified.cosignatures] == [(cosigner.name, NOW)]


def test_extension_with_a_valid_proof_is_cosigned(
    signer: Ed25519Signer, cosigner: CosignatureSigner
) -> None:
    view = View(signer)
    view.grow(5)
    held = held_after(run(view.request(0), signer, cosigner))
    view.grow(7)
    decision = run(view.request(5), signer, cosigner, held)
    assert decision.status == 200
    assert decision.record is not None and decision.record.size == 12


def test_same_checkpoint_again_is_cosigned_without_a_new_record(
    signer: Ed25519Signer, cosigner: CosignatureSigner
) -> None:
    view = View(signer)
    view.grow(3)
    held = held_after(run(view.request(0), signer, cosigner))
    decision = run(view.request(3), signer, cosigner, held)
    assert decision.status == 200 and decision.record is None


def test_stale_old_size_is_409_with_the_size_and_no_evidence(
    signer: Ed25519Signer, cosigner: CosignatureSigner
) -> None:
    view = View(signer)
    view.grow(4)
    held = held_after(run(view.request(0), signer, cosigner))
    view.grow(4)
    decision = run(view.request(0), signer, cosigner, held)
    assert (decision.status, decision.body) == (409, "4\n")
    assert decision.content_type == SIZE_CONTENT_TYPE and decision.evidence is None


def test_fork_at_the_same_size_is_409_with_evidence(
    signer: Ed25519Signer, cosigner: CosignatureSigner
) -> None:
    honest, forked = View(signer, "a"), View(signer, "b")
    honest.grow(6)
    forked.grow(6)
    held = held_after(run(honest.request(0), signer, cosigner))
    decision = run(forked.request(6), signer, cosigner, held)
    assert decision.status == 409 and decision.content_type != SIZE_CONTENT_TYPE
    assert decision.evidence is not None and decision.evidence.kind == "same-size-different-root"
    assert decision.evidence.cosigned_note == honest.log.checkpoint(6).note
    assert decision.evidence.submitted_note == forked.log.checkpoint(6).note
    assert decision.record is None


def test_fork_that_cannot_be_proven_is_422_with_evidence(
    signer: Ed25519Signer, cosigner: CosignatureSigner
) -> None:
    honest, forked = View(signer, "a"), View(signer, "b")
    honest.grow(6)
    forked.grow(9)
    held = held_after(run(honest.request(0), signer, cosigner))
    decision = run(forked.request(6), signer, cosigner, held)
    assert decision.status == 422 and decision.record is None
    assert decision.evidence is not None and decision.evidence.kind == "inconsistent-proof"


def test_evidence_key_ignores_the_proof(signer: Ed25519Signer, cosigner: CosignatureSigner) -> None:
    honest, forked = View(signer, "a"), View(signer, "b")
    honest.grow(6)
    forked.grow(9)
    held = held_after(run(honest.request(0), signer, cosigner))
    note = forked.log.checkpoint(0).note
    first = run(forked.request(6), signer, cosigner, held).evidence
    other = run(build_request(6, [b"\x01" * 32] * 3, note), signer, cosigner, held).evidence
    assert first is not None and other is not None and first.key == other.key


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("old 7\n\n{note}", 400),  # old > checkpoint size (5)
        ("old 0\n{h}\n\n{note}", 400),  # a proof with old size 0
    ],
)
def test_bad_sizes_are_400(
    signer: Ed25519Signer, cosigner: CosignatureSigner, body: str, status: int
) -> None:
    view = View(signer)
    view.grow(5)
    text = body.format(note=view.log.checkpoint(0).note, h=base64.b64encode(b"\0" * 32).decode())
    assert run(text.encode(), signer, cosigner).status == status


def test_unknown_origin_is_404(cosigner: CosignatureSigner, signer: Ed25519Signer) -> None:
    other = View(Ed25519Signer.generate("other.test/log"))
    other.grow(2)
    decision = run(other.request(0), signer, cosigner)
    assert decision.status == 404 and "other.test/log" in decision.body


def test_untrusted_signature_is_403(signer: Ed25519Signer, cosigner: CosignatureSigner) -> None:
    impostor = View(Ed25519Signer.generate(ORIGIN))  # same name and origin, another key
    impostor.grow(2)
    assert run(impostor.request(0), signer, cosigner).status == 403


def test_bad_proof_without_record_mismatch_is_422(
    signer: Ed25519Signer, cosigner: CosignatureSigner
) -> None:
    view = View(signer)
    view.grow(5)
    held = held_after(run(view.request(0), signer, cosigner))
    view.grow(5)
    good = view.request(5)
    bad = good.replace(good.split(b"\n")[1], base64.b64encode(b"\x07" * 32))
    assert run(bad, signer, cosigner, held).status == 422


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"old 1\n", "no empty line"),
        (b"old 01\n\nx", "not 'old"),
        (b"new 1\n\nx", "not 'old"),
        (b"old 1\nnotbase64\n\nx", "proof line 1"),
        (b"old 1\n" + b"AAAA\n" + b"\nx", "proof line 1"),
        (b"\xff\xfe\n\nx", "not UTF-8"),
        (b"old 1\n" + b"x" * 20_000, "at most"),
    ],
)
def test_malformed_bodies_are_named(body: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_request(body)


def test_too_many_proof_lines() -> None:
    line = base64.b64encode(b"\0" * 32)
    with pytest.raises(FormatError, match="proof lines"):
        parse_request(b"old 1\n" + (line + b"\n") * (MAX_PROOF_LINES + 1) + b"\nx")


def test_request_round_trip(signer: Ed25519Signer) -> None:
    view = View(signer)
    view.grow(9)
    body = view.request(4)
    parsed = parse_request(body)
    assert build_request(parsed.old_size, parsed.proof, parsed.note) == body
    assert parsed.old_size == 4 and len(parsed.proof) > 0


def test_malformed_checkpoint_is_400(signer: Ed25519Signer, cosigner: CosignatureSigner) -> None:
    assert run(b"old 0\n\nnot a note\n", signer, cosigner).status == 400


def test_core_is_pure_and_names_exist() -> None:
    import sys

    from ledger.witness import core as witness_core

    for name in witness_core.__all__:
        assert hasattr(witness_core, name), name
    probe = (
        "import sys, ledger.witness.core; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('grpc', 'rocksdict', 'google', 'aiohttp', 'socket', 'ledger.witness.state')]; "
        "assert not bad, bad"
    )
    processes.run([sys.executable, "-c", probe], check=True, timeout=60)
