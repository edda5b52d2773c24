"""Lineage that is declared or exact (issue 21 item 2), with an in-memory sink: one test per
derived form (an f-string, an extracted field, a number and a boolean via ``derived_from``),
content matches labelled as inferred, and no false parents from interned short values."""

from __future__ import annotations

from typing import Any

from ledger.records.links import CONTENT_MATCH, MIN_MATCH_CHARS, inferred_parents
from ledger_client.sdk import derived_from
from ledger_client.sdk.context import ledger_run
from ledger_client.sdk.decorators import decision
from tests.agent_sink import Sink

ARTICLE = "The quarterly refund policy allows refunds up to 100 EUR without review."


@decision("tool_call")
def search(query: str) -> dict[str, Any]:
    return {"title": "Refund policy, third quarter edition", "body": ARTICLE, "hits": 3}


@decision("tool_call")
def fetch(url: str) -> str:
    return ARTICLE


@decision("tool_call")
def ask_model(prompt: str) -> str:
    return "OK"


@decision("tool_call")
def status() -> str:
    return "OK"


@decision("constraint_check", constraint_id="enough-hits")
def enough(count: int) -> bool:
    return count > 2


@decision("tool_call")
def act(go: bool) -> str:
    return "done"


def test_an_f_string_built_from_an_output_links_by_content() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a"):
        page = fetch("https://example.org/policy")
        ask_model(f"Summarise for the customer:\n{page}\nBe brief.")
    f, m, _ = sink.records
    assert m.parent_digests == (sink.hex(f),)
    assert inferred_parents(m) == {sink.hex(f): CONTENT_MATCH}  # labelled, inside the record


def test_an_extracted_field_links_by_content() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a"):
        found = search("refunds")
        ask_model(found["body"])  # a field of the output, not the output object
    s, m, _ = sink.records
    assert m.parent_digests == (sink.hex(s),) and inferred_parents(m) == {
        sink.hex(s): CONTENT_MATCH
    }


def test_a_number_links_via_derived_from() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a") as run:
        found = search("refunds")
        hits = derived_from(found["hits"] + 0, run.entries[-1])
        enough(hits)
        enough(3)  # an equal number nobody declared: no parent
    s, e1, e2, _ = sink.records
    assert e1.parent_digests == (sink.hex(s),) and inferred_parents(e1) == {}  # declared
    assert e2.parent_digests == ()


def test_a_boolean_links_via_derived_from() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a") as run:
        ok = enough(3)
        act(derived_from(ok, run.entries[-1]))
        act(True)  # the same interned True, not declared: no parent
    e, a1, a2, _ = sink.records
    assert a1.parent_digests == (sink.hex(e),) and a2.parent_digests == ()


def test_interned_short_values_make_no_false_parents() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a"):
        status()  # returns the interned "OK"
        ask_model("OK")  # an unrelated "OK" literal: the very same object
    s, m, _ = sink.records
    assert m.parent_digests == () and len("OK") < MIN_MATCH_CHARS
    assert s.parent_digests == ()


def test_a_value_passed_along_links_to_the_last_holder() -> None:
    sink = Sink()

    @decision("memory_write", trust_label="untrusted", source="web")
    def remember(page: str) -> str:
        return page  # the same text, one step further

    with ledger_run(sink, agent="a"):
        note = remember(fetch("https://example.org/policy"))
        ask_model(f"Use: {note}")
    f, r, m, _ = sink.records
    assert r.parent_digests == (sink.hex(f),) and m.parent_digests == (sink.hex(r),)


def test_declared_parents_are_not_labelled_inferred() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a") as run:
        page = fetch("https://example.org/policy")
        first = run.entries[-1]

        @decision("tool_call", parents=[first])
        def quote(text: str) -> str:
            return "quoted"

        quote(page)
    f, q, _ = sink.records
    assert q.parent_digests == (sink.hex(f),) and inferred_parents(q) == {}
