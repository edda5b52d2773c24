"""Tokens (hashes only, with expiry), scopes, the open development log and the closed state
it keeps in the data dir's binding, token-bucket rate limits (on by default) and the
failed-authentication throttle."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.api.auth import FailureThrottle, Policy, RateLimiter, TokenStore, required_scope
from ledger.app.settings import Settings
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import (
    FormatError,
    KeyFileModeError,
    NotFoundError,
    PermissionDeniedError,
    PushbackError,
    UnauthenticatedError,
)
from ledger.ops.binding import AccessWatch, bind_signer, read_binding, set_access

APPEND = "/ledger.v1.LedgerService/AppendRecords"
ANCHOR = "/ledger.v1.LedgerService/AnchorNow"
READ = "/ledger.v1.LedgerService/GetCheckpoint"


def test_tokens_are_stored_as_hashes_only(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    token, record = store.create("agent-a", ["append"], now=1)
    text = (tmp_path / "tokens.json").read_text()
    assert token not in text and token.split("_", 2)[2] not in text
    assert json.loads(text)["tokens"][0]["name"] == "agent-a"
    assert stat.S_IMODE((tmp_path / "tokens.json").stat().st_mode) == 0o600
    assert store.lookup(token) == record
    assert store.lookup(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert store.lookup("garbage") is None
    other = TokenStore(tmp_path / "tokens.json")
    assert other.lookup(token) == record
    with pytest.raises(FormatError, match="exists"):
        store.create("agent-a", ["admin"], now=2)
    with pytest.raises(FormatError, match="scopes"):
        store.create("b", ["write"], now=2)
    assert store.revoke("agent-a") == record
    assert store.lookup(token) is None
    with pytest.raises(NotFoundError):
        store.revoke("agent-a")


def test_a_revoke_reaches_a_running_reader_within_a_second(tmp_path: Path) -> None:
    now = [0.0]
    reader = TokenStore(tmp_path / "tokens.json", clock=lambda: now[0])
    writer = TokenStore(tmp_path / "tokens.json")
    token, _ = writer.create("a", ["append"], now=1)
    now[0] += 1.5
    assert reader.lookup(token) is not None
    writer.revoke("a")
    now[0] += 1.5
    assert reader.lookup(token) is None


def test_a_readable_tokens_file_is_refused(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    store.create("a", ["append"], now=1)
    (tmp_path / "tokens.json").chmod(0o644)
    with pytest.raises(KeyFileModeError, match="chmod 600"):
        TokenStore(tmp_path / "tokens.json")


def test_policy_scopes(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    appender, _ = store.create("w", ["append"], now=1)
    admin, _ = store.create("root", ["admin"], now=1)
    reader, _ = store.create("r", ["read"], now=1)
    policy = Policy(tokens=store, mtls={"agent-b": ["append"]}, loopback=False,
                    reads_need_token=False)  # fmt: skip
    with pytest.raises(UnauthenticatedError):
        policy.decide(APPEND, None, None)
    with pytest.raises(UnauthenticatedError, match="invalid"):
        policy.decide(APPEND, "dl_00000000_" + "A" * 43, None)
    with pytest.raises(PermissionDeniedError, match="append"):
        policy.decide(APPEND, reader, None)
    with pytest.raises(PermissionDeniedError, match="admin"):
        policy.decide(ANCHOR, appender, None)
    assert policy.decide(APPEND, appender, None).name == "token:w"
    assert policy.decide(ANCHOR, admin, None).name == "token:root"
    assert policy.decide(APPEND, admin, None).name == "token:root"
    assert policy.decide(APPEND, None, "agent-b").name == "mtls:agent-b"
    with pytest.raises(UnauthenticatedError):
        policy.decide(APPEND, None, "stranger")
    assert policy.decide(READ, None, None).name == "anonymous"
    closed = Policy(tokens=store, mtls={}, loopback=False, reads_need_token=True)
    with pytest.raises(UnauthenticatedError):
        closed.decide(READ, None, None)
    with pytest.raises(PermissionDeniedError):
        closed.decide(READ, appender, None)
    assert closed.decide(READ, reader, None).name == "token:r"
    health = "/grpc.health.v1.Health/Check"
    assert closed.decide(health, None, None).name == "anonymous"
    assert closed.decide(health, appender, None).name == "token:w"


def test_the_open_development_log_lets_everyone_append(tmp_path: Path) -> None:
    policy = Policy(tokens=TokenStore(tmp_path / "t.json"), mtls={}, loopback=True,
                    reads_need_token=False)  # fmt: skip
    assert policy.decide(APPEND, None, None).allows("append")
    assert "anyone may append" in policy.mode
    with pytest.raises(UnauthenticatedError):  # a bad token is still refused
        policy.decide(APPEND, "dl_bad", None)
    assert policy.tokens is not None
    policy.tokens.create("first", ["append"], now=1)  # the first token closes the log
    assert not policy.open_log
    with pytest.raises(UnauthenticatedError):
        policy.decide(APPEND, None, None)


def test_required_scopes() -> None:
    assert required_scope(APPEND) == "append"
    assert required_scope("/ledger.v1.LedgerService/StreamAppend") == "append"
    assert required_scope(ANCHOR) == "admin"
    assert required_scope("/ledger.v1.LedgerService/Backup") == "admin"
    assert required_scope(READ) is None
    assert required_scope("/grpc.health.v1.Health/Check") is None


@given(st.floats(0.5, 1000), st.integers(1, 50), st.lists(st.floats(0, 2), max_size=60))
def test_token_bucket_never_exceeds_burst_plus_rate(
    rate: float, burst: int, gaps: list[float]
) -> None:
    now = [0.0]
    limiter = RateLimiter(rate, burst, clock=lambda: now[0])
    allowed = 0
    for gap in gaps:
        now[0] += gap
        try:
            limiter.take("x")
            allowed += 1
        except PushbackError as exc:
            assert 0 < exc.retry_after <= 1 / rate + 1e-9
    assert allowed <= burst + now[0] * rate + 1e-6


def test_rate_limits_are_per_identity() -> None:
    limiter = RateLimiter(1.0, 2, clock=lambda: 0.0)
    limiter.take("a")
    limiter.take("a")
    with pytest.raises(PushbackError, match="rate limit of a"):
        limiter.take("a")
    limiter.take("b")
    RateLimiter(0, 1).take("a")  # 0: unlimited


def test_rate_limits_and_the_failure_throttle_are_on_by_default() -> None:
    settings = Settings()
    assert settings.rate_per_s == 5000 and settings.burst == 10_000
    assert settings.auth_failures == 20 and settings.auth_failure_window_s == 60


def test_the_failure_throttle_counts_per_address_within_its_window() -> None:
    now = [0.0]
    throttle = FailureThrottle(3, 10.0, clock=lambda: now[0])
    for _ in range(3):
        throttle.check("ipv4:10.0.0.1")
        throttle.failed("ipv4:10.0.0.1")
    with pytest.raises(PushbackError, match="too many failed authentications") as caught:
        throttle.check("ipv4:10.0.0.1")
    assert caught.value.retry_after == pytest.approx(10.0)
    throttle.check("ipv4:10.0.0.2")  # another address is not affected
    now[0] = 10.0
    throttle.check("ipv4:10.0.0.1")  # the window has passed
    throttle.failed("ipv4:10.0.0.1")
    throttle.check("ipv4:10.0.0.1")
    FailureThrottle(0, 1.0).check("x")  # 0: off


def test_tokens_expire(tmp_path: Path) -> None:
    now = [100.0]
    store = TokenStore(tmp_path / "tokens.json")
    with pytest.raises(FormatError, match="not after now"):
        store.create("late", ["append"], now=100, expires=100)
    token, record = store.create("short", ["append"], now=100, expires=160)
    assert json.loads((tmp_path / "tokens.json").read_text())["tokens"][0]["expires"] == 160
    policy = Policy(tokens=TokenStore(tmp_path / "tokens.json"), mtls={}, loopback=False,
                    reads_need_token=False, clock=lambda: now[0])  # fmt: skip
    assert policy.decide(APPEND, token, None).name == "token:short"
    now[0] = 160.0
    with pytest.raises(UnauthenticatedError, match="token expired"):
        policy.decide(APPEND, token, None)
    assert record.expired(160) and not record.expired(159.9)


def test_the_closed_state_outlives_the_tokens_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    bind_signer(data, Ed25519Signer.generate("ledger.test/auth"), "ledger.test/auth")
    tokens = TokenStore(data / "tokens.json")
    policy = Policy(tokens=tokens, mtls={}, loopback=True, reads_need_token=False,
                    access=AccessWatch(data))  # fmt: skip
    assert policy.open_log
    tokens.create("first", ["append"], now=1)
    assert not policy.open_log  # and recorded in the binding
    binding = read_binding(data)
    assert binding is not None and binding.closed
    assert [e.by for e in binding.access_events] == ["ledger serve"]
    (data / "tokens.json").unlink()
    fresh = Policy(tokens=TokenStore(data / "tokens.json"), mtls={}, loopback=True,
                   reads_need_token=False, access=AccessWatch(data))  # fmt: skip
    assert not fresh.open_log
    with pytest.raises(UnauthenticatedError, match="ledger access open"):
        fresh.decide(APPEND, None, None)
    assert "no usable token" in fresh.mode
    set_access(data, "open", by="test", reason="deliberately")
    assert Policy(tokens=TokenStore(data / "tokens.json"), mtls={}, loopback=True,
                  reads_need_token=False, access=AccessWatch(data)).open_log  # fmt: skip


def test_every_method_of_the_service_has_an_explicit_rule() -> None:
    """Default deny: the descriptor's methods are exactly the ones the rules name, each once,
    and anything else (a method added to the proto without a rule) is refused to everyone."""
    from ledger.api.auth import ADMIN_METHODS, APPEND_METHODS, READ_METHODS
    from ledger.v1 import ledger_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["LedgerService"]
    names = [m.name for m in service.methods]
    rules = [*READ_METHODS, *APPEND_METHODS, *ADMIN_METHODS]
    assert sorted(rules) == sorted(names)  # every method has exactly one rule, none is stale
    for name in names:
        scope = required_scope(f"/{service.full_name}/{name}")
        assert scope == ("admin" if name in ADMIN_METHODS else
                         "append" if name in APPEND_METHODS else None)  # fmt: skip
    assert required_scope("/ledger.v1.LedgerService/AppendPacked") == "append"


def test_methods_without_a_rule_are_denied_to_everyone(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "t.json")
    admin, _ = store.create("boss", ["admin"], now=1)
    closed = Policy(tokens=store, mtls={}, loopback=False, reads_need_token=False)
    dev = Policy(tokens=None, mtls={}, loopback=True, reads_need_token=False)
    assert dev.open_log
    for method in ("/ledger.v1.LedgerService/DropEverything", "/other.v1.Service/Get",
                   "/ledger.v1.LedgerService/", "AppendRecords"):  # fmt: skip
        with pytest.raises(PermissionDeniedError, match="no access rule"):
            required_scope(method)
        with pytest.raises(PermissionDeniedError, match="no access rule"):
            closed.decide(method, admin, None)
        with pytest.raises(PermissionDeniedError, match="no access rule"):
            dev.decide(method, None, None)
