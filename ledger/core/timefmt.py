"""The one time formatter: RFC 3339 §5.6 date-times in UTC with a ``Z``, at the precisions the
project writes, and the one parser of the times people type.

* ``rfc3339``: seconds, with the fraction only when there is one (``2026-01-02T03:04:05Z``,
  ``2026-01-02T03:04:05.250000Z``): receipt and anchor times, verifier output, messages.
* ``rfc3339_millis``: always milliseconds, truncated (``2026-01-02T03:04:05.678Z``): record
  times (the SDK) and audit reports.
* ``rfc3339_seconds``: whole seconds, truncated (``2026-01-02T03:04:05Z``): listings.
* ``parse_rfc3339``: an RFC 3339 date-time with ``Z`` or an offset (``ValueError`` otherwise).

A naive ``datetime`` is taken as UTC. Pure: no clock is read here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = [
    "from_epoch_ms",
    "from_epoch_seconds",
    "parse_rfc3339",
    "rfc3339",
    "rfc3339_millis",
    "rfc3339_seconds",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _date_time(moment: datetime) -> str:
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )


def rfc3339(moment: datetime) -> str:
    """``2026-01-02T03:04:05Z``, or ``...05.250000Z`` when there are microseconds."""
    utc = _utc(moment)
    fraction = f".{utc.microsecond:06d}" if utc.microsecond else ""
    return f"{_date_time(utc)}{fraction}Z"


def rfc3339_millis(moment: datetime) -> str:
    """``2026-01-02T03:04:05.678Z``: milliseconds, truncated."""
    utc = _utc(moment)
    return f"{_date_time(utc)}.{utc.microsecond // 1000:03d}Z"


def rfc3339_seconds(moment: datetime) -> str:
    """``2026-01-02T03:04:05Z``: whole seconds, truncated."""
    return f"{_date_time(_utc(moment))}Z"


def from_epoch_ms(ms: int) -> datetime:
    """Milliseconds since the Unix epoch as an aware UTC datetime (exact)."""
    return _EPOCH + timedelta(milliseconds=ms)


def from_epoch_seconds(seconds: float) -> datetime:
    """Seconds since the Unix epoch as an aware UTC datetime (to the nearest microsecond)."""
    return datetime.fromtimestamp(seconds, UTC)


def parse_rfc3339(text: str) -> datetime:
    """An aware datetime from an RFC 3339 date-time (``Z``/``z`` or a ``+hh:mm`` offset)."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError("expected an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise ValueError("give a time zone (e.g. Z)")
    return moment
