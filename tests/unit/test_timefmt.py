"""The one time formatter writes exactly what the six formatters it replaced wrote (receipts,
reports and tests depend on those strings), and its parser reads what it writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.timefmt import (
    from_epoch_ms,
    from_epoch_seconds,
    parse_rfc3339,
    rfc3339,
    rfc3339_millis,
    rfc3339_seconds,
)

moments = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)
)
epoch_ms = st.integers(min_value=0, max_value=253_402_300_799_999)


def test_examples() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    assert rfc3339(moment) == "2026-01-02T03:04:05.678901Z"
    assert rfc3339(moment.replace(microsecond=0)) == "2026-01-02T03:04:05Z"
    assert rfc3339_millis(moment) == "2026-01-02T03:04:05.678Z"
    assert rfc3339_seconds(moment) == "2026-01-02T03:04:05Z"
    east = moment.astimezone(timezone(timedelta(hours=2)))
    assert rfc3339(east) == rfc3339(moment)  # always UTC
    assert rfc3339(moment.replace(tzinfo=None)) == rfc3339(moment)  # naive: taken as UTC


@given(moments)
def test_rfc3339_is_the_isoformat_it_replaced(moment: datetime) -> None:
    assert rfc3339(moment) == moment.isoformat().replace("+00:00", "Z")
    assert parse_rfc3339(rfc3339(moment)) == moment


@given(epoch_ms)
def test_millis_is_the_audit_formatter_it_replaced(ms: int) -> None:
    old = datetime.fromtimestamp(ms / 1000, UTC)
    assert rfc3339_millis(from_epoch_ms(ms)) == old.strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{ms % 1000:03d}Z"
    )


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_millis_is_the_sdk_formatter_it_replaced(seconds: float) -> None:
    old = datetime.fromtimestamp(seconds, UTC)
    want = old.strftime("%Y-%m-%dT%H:%M:%S.") + f"{old.microsecond // 1000:03d}Z"
    assert rfc3339_millis(from_epoch_seconds(seconds)) == want


@given(st.integers(min_value=0, max_value=2**33))
def test_seconds_is_the_token_listing_formatter_it_replaced(created: int) -> None:
    old = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rfc3339_seconds(from_epoch_seconds(created)) == old


def test_parse_needs_rfc3339_with_a_zone() -> None:
    assert parse_rfc3339("2026-01-02T03:04:05z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_rfc3339("2026-01-02T05:04:05+02:00") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with pytest.raises(ValueError, match="give a time zone"):
        parse_rfc3339("2026-01-02T03:04:05")
    with pytest.raises(ValueError, match="expected an RFC 3339 time"):
        parse_rfc3339("yesterday")


def test_certificate_validity_messages_use_the_one_format() -> None:
    """They used ``isoformat()`` (``+00:00``); every other time the project writes ends in Z."""
    from ledger.core.errors import TimestampError
    from ledger.timestamp.certs import check_validity
    from ledger.tsa.authority import TsaAuthority

    authority = TsaAuthority.generate("Test TSA")
    late = datetime(9000, 1, 1, 0, 0, 0, 250_000, tzinfo=UTC)
    with pytest.raises(TimestampError) as refused:
        check_validity([authority.tsa_cert], late)
    assert "not at 9000-01-01T00:00:00.250000Z" in str(refused.value)
    assert "+00:00" not in str(refused.value)
