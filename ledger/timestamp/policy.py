"""Anchor time policy: when may an RFC 3161 genTime (RFC 3161 §2.4.2) date a logged entry?

Pure: no I/O, no clock (the caller passes ``now``). A token that verifies (``verify_token``)
proves that its TSA signed the stamped checkpoint body at genTime, give or take the token's own
``accuracy``. The verifier adds two checks that tie that time to what a receipt asserts:

    anchor-before-leaf   genTime + accuracy + skew < the leaf's time (the log's receive time).
                         The stamped checkpoint covers the leaf, so it cannot be older than it:
                         an honest TSA cannot have stamped it earlier.
    anchor-in-future     genTime - accuracy > now + skew: a token from the future (a TSA
                         clock that is wrong, or a forged time) dates nothing.

``skew`` (default ``DEFAULT_SKEW``, 5 minutes) allows for the log's clock and the TSA's clock
disagreeing; the leaf time is the log operator's claim and genTime the TSA's. Both failures are
:class:`~ledger.core.errors.TimestampError` naming the check.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ledger.core.errors import FormatError, TimestampError
from ledger.core.timefmt import rfc3339

__all__ = [
    "DEFAULT_SKEW",
    "anchor_in_future",
    "check_gen_time",
    "check_not_before_leaf",
    "future_bound",
]

DEFAULT_SKEW = timedelta(minutes=5)


def _slack(accuracy: timedelta | None) -> timedelta:
    return accuracy or timedelta(0)


def future_bound(gen_time: datetime, accuracy: timedelta | None, skew: timedelta) -> datetime:
    """The earliest verification time ``now`` at which ``gen_time`` is not in the future:
    ``anchor-in-future`` fails exactly for ``now < future_bound(...)``. A cached verdict of that
    check holds on one side of this instant only."""
    return gen_time - _slack(accuracy) - skew


def anchor_in_future(
    gen_time: datetime, accuracy: timedelta | None, *, now: datetime, skew: timedelta
) -> TimestampError:
    """The ``anchor-in-future`` failure of ``gen_time`` checked at ``now``."""
    return TimestampError(
        "anchor-in-future",
        f"genTime {rfc3339(gen_time)} (accuracy {_slack(accuracy).total_seconds():g}s) is after "
        f"the verification time {rfc3339(now)} plus the allowed skew of "
        f"{skew.total_seconds():g}s",
    )


def check_not_before_leaf(
    gen_time: datetime, accuracy: timedelta | None, *, not_before: datetime, skew: timedelta
) -> None:
    """The ``anchor-before-leaf`` check alone (``check_gen_time`` makes it first)."""
    slack = _slack(accuracy)
    if gen_time + slack + skew < not_before:
        raise TimestampError(
            "anchor-before-leaf",
            f"genTime {rfc3339(gen_time)} (accuracy {slack.total_seconds():g}s) precedes the "
            f"leaf's time {rfc3339(not_before)} by more than the allowed skew of "
            f"{skew.total_seconds():g}s: the stamped checkpoint covers that leaf",
        )


def check_gen_time(
    gen_time: datetime,
    accuracy: timedelta | None,
    *,
    now: datetime,
    not_before: datetime | None = None,
    skew: timedelta = DEFAULT_SKEW,
) -> None:
    """Apply the policy above to a verified genTime; ``now`` and ``not_before`` are aware.

    ``not_before`` is the leaf time of the entry the anchored checkpoint covers (None: no
    lower bound, e.g. a bare token). Requires ``skew >= 0``.
    """
    if now.tzinfo is None or (not_before is not None and not_before.tzinfo is None):
        raise FormatError("anchor time policy needs timezone-aware times")
    if skew < timedelta(0):
        raise FormatError(f"clock skew must be >= 0, got {skew}")
    if not_before is not None:
        check_not_before_leaf(gen_time, accuracy, not_before=not_before, skew=skew)
    if now < future_bound(gen_time, accuracy, skew):
        raise anchor_in_future(gen_time, accuracy, now=now, skew=skew)
