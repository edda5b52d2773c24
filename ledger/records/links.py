"""How a record says which of its parent links were inferred, not declared.

docs/formats.md "Parent links": every parent of a record is in ``parent_digests``; a link the
agent's SDK inferred (not one the agent declared) is also named in the record's ``evidence``
under ``derived_by:<how>:<n>`` with the parent's digest as value, so the label is inside the
logged record (tamper-evident) and needs no new record field: schema v1 readers accept it.
The one kind of inferred link is ``content-match`` (``ledger_client.sdk.links``): a whole
recorded output, or a whole string field of one, of at least ``MIN_MATCH_CHARS`` characters,
contained in a later call's input and found in exactly one output of the run.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ledger.records.decision import DecisionRecord

__all__ = [
    "CONTENT_MATCH",
    "DERIVED_BY",
    "EMPTY_ARGUMENTS_DIGEST",
    "MIN_MATCH_CHARS",
    "derived_by_evidence",
    "inferred_parents",
    "takes_inputs",
]

CONTENT_MATCH = "content-match"
DERIVED_BY = "derived_by:"
MIN_MATCH_CHARS = 24  # shorter values say nothing about where a later input came from
# SHA-256 of the canonical bytes of ``{}``: the arguments digest of a call with no arguments.
EMPTY_ARGUMENTS_DIGEST = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


def derived_by_evidence(parents: Iterable[str], how: str = CONTENT_MATCH) -> dict[str, str]:
    """The evidence entries labelling ``parents`` (hex digests) as inferred by ``how``."""
    return {f"{DERIVED_BY}{how}:{n}": digest for n, digest in enumerate(parents)}


def inferred_parents(record: DecisionRecord) -> dict[str, str]:
    """Parent digest -> how it was inferred, for the parents the record labels as inferred
    (a label naming no parent of the record is ignored)."""
    out: dict[str, str] = {}
    if not record.parent_digests or not any(n.startswith(DERIVED_BY) for n in record.evidence):
        return out  # nothing labelled, or no parent to label: the usual record
    parents = set(record.parent_digests)
    for name, digest in _items(record.evidence):
        if name.startswith(DERIVED_BY) and digest in parents:
            out.setdefault(digest, name[len(DERIVED_BY) :].rsplit(":", 1)[0])
    return out


def _items(evidence: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    return sorted(evidence.items())


def takes_inputs(record: DecisionRecord) -> bool:
    """Whether the record says it took inputs (arguments in ``parameters``, an arguments
    digest other than that of no arguments, or PROV ``inputs_used``); ``run_closed`` never."""
    if record.kind == "run_closed":
        return False
    if record.parameters:
        return True
    arguments = record.evidence.get("arguments")
    if arguments is not None and arguments != EMPTY_ARGUMENTS_DIGEST:
        return True
    used = getattr(record.payload, "inputs_used", ()) or ()
    return any(d != EMPTY_ARGUMENTS_DIGEST for d in used)
