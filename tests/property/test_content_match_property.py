"""Content-match links never join unrelated outputs: outputs that share boilerplate (or short
strings) and a later input that shares the same boilerplate (or short strings) but none of
their whole values are never linked, whatever the texts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.records.links import MIN_MATCH_CHARS
from ledger_client.sdk.context import ledger_run
from ledger_client.sdk.decorators import decision
from tests.agent_sink import Sink

words = st.text(alphabet="abcdefghij XYZ,.", min_size=0, max_size=40)
short = st.text(alphabet="abcdefghij XYZ,.", min_size=0, max_size=MIN_MATCH_CHARS - 1)


OUTPUTS: list[str] = []


@decision("tool_call")
def tool(n: int) -> str:
    """An output unrelated to any input: the n-th text of the example."""
    return OUTPUTS[n]


@decision("tool_call")
def later(prompt: str) -> str:
    return "done"


@settings(max_examples=120, deadline=None)
@given(
    boilerplate=st.text(alphabet="abcdefghij XYZ,.", min_size=MIN_MATCH_CHARS, max_size=60),
    tails=st.lists(st.integers(0, 10**9), min_size=2, max_size=4, unique=True),
    fresh=st.integers(0, 10**9),
    shorts=st.lists(short, min_size=1, max_size=3),
    extra=words,
)
def test_unrelated_outputs_sharing_boilerplate_or_short_strings_never_link(
    boilerplate: str, tails: list[int], fresh: int, shorts: list[str], extra: str
) -> None:
    if fresh in tails:
        return
    # the boilerplate is one output and part of several others; short outputs besides
    OUTPUTS[:] = [boilerplate, *(f"{boilerplate} #{t:010d}" for t in tails), *shorts]
    sink = Sink()
    with ledger_run(sink, agent="p"):
        for n in range(len(OUTPUTS)):
            tool(n)
        later(f"{extra}{boilerplate} #{fresh:010d} {' '.join(shorts)}")
    prompt = sink.records[-2]
    assert prompt.parent_digests == (), prompt
