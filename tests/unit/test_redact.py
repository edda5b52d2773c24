"""``ledger.core.redact``: a URL's userinfo, query and fragment never survive redaction."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.errors import TimestampError, UnavailableError
from ledger.core.redact import UNPARSABLE, redact_text, redact_url
from ledger.log.metrics import error_class

# Secrets are drawn from an alphabet the host and path never use, so "not in the output" is a
# real check (a one-letter password is not "found" in a host that happens to contain it).
SECRET = st.text("ABCDEFGHJKMNPQRSTUVWXYZ%=&~!$'()*+,;", min_size=1, max_size=20)
HOST = st.from_regex(r"[a-z]{1,10}(\.[a-z]{1,8}){0,2}", fullmatch=True)
PATH = st.from_regex(r"(/[a-z0-9._-]{0,8}){0,4}", fullmatch=True)


@given(
    scheme=st.sampled_from(["http", "https"]),
    user=SECRET,
    password=st.none() | SECRET,
    host=HOST,
    port=st.none() | st.integers(1, 65535),
    path=PATH,
    query=st.none() | SECRET,
    fragment=st.none() | SECRET,
)
def test_output_never_carries_userinfo_query_or_fragment(
    scheme: str,
    user: str,
    password: str | None,
    host: str,
    port: int | None,
    path: str,
    query: str | None,
    fragment: str | None,
) -> None:
    userinfo = user if password is None else f"{user}:{password}"
    where = host if port is None else f"{host}:{port}"
    url = f"{scheme}://{userinfo}@{where}{path}"
    url += "" if query is None else f"?{query}"
    url += "" if fragment is None else f"#{fragment}"
    shown = redact_url(url)
    for secret in (user, password, query, fragment):
        assert secret is None or secret not in shown, (url, shown)
    assert shown == f"{scheme}://{where}{path}" + ("?…" if query is not None else "") + (
        "#…" if fragment is not None else ""
    )  # scheme, host, port and path are kept
    assert redact_url(shown) == shown
    assert secret_free(redact_text(f"tsa <{url}> unreachable {url}"), user, password, query)
    assert redact_text(f"tsa <{url}> unreachable {url}") == f"tsa <{shown}> unreachable {shown}"


def secret_free(text: str, *secrets: str | None) -> bool:
    return all(s is None or s not in text for s in secrets)


def test_examples() -> None:
    assert (
        redact_url("https://u:p@tsa.example:8443/tsr?apikey=k#f")
        == "https://tsa.example:8443/tsr?…#…"
    )
    assert redact_url("https://tsa.example/tsr") == "https://tsa.example/tsr"
    assert redact_url("http://[::1") == UNPARSABLE  # unparsable: nothing of it shown
    assert redact_url("u:p@host/path?k") == UNPARSABLE  # no "//": userinfo left in the path
    assert redact_text("no url here") == "no url here"


def test_metric_label_is_the_error_class() -> None:
    assert error_class(TimestampError("network", "TSA http://u:p@h/?k unreachable")) == (
        "TimestampError/network"
    )
    assert error_class(UnavailableError("http://u:p@h/?k unreachable")) == "UnavailableError"
