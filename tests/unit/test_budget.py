"""The in-flight byte budget: refuses past its limit with a retry hint, releases on exit."""

from __future__ import annotations

import pytest

from ledger.api.budget import ByteBudget
from ledger.core.errors import PushbackError


def test_the_budget_refuses_past_its_limit_and_releases() -> None:
    budget = ByteBudget(100)
    with budget.holding(60, "request"):
        with pytest.raises(PushbackError, match="request of 50 bytes does not fit") as info:
            budget.take(50, "request")
        assert info.value.retry_after > 0
        budget.take(40, "message")
        assert budget.held == 100
        budget.give(40)
    assert budget.held == 0 and budget.peak == 100
    with pytest.raises(ValueError):
        ByteBudget(0)
