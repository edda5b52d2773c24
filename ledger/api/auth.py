"""Who may call what: bearer tokens (stored only as hashes), mTLS identities, scopes, and
per-identity token-bucket rate limits. No grpc here: ``ledger.api.interceptor`` adapts it.

Tokens look like ``dl_<id>_<secret>`` (id: 8 hex digits, secret: 32 random bytes, base64url);
the tokens file (JSON, mode 0600) keeps, per token, its id, name, scopes, creation time, optional
expiry (unix seconds; an expired token is UNAUTHENTICATED "token expired") and SHA-256 of the
whole token, never the token. Scopes: ``append`` (AppendRecords, StreamAppend, AppendPacked),
``admin`` (AnchorNow, Backup, and everything ``append`` may do), ``read`` (reads, only needed
when ``[auth] reads = "token"``; health checks stay open for load balancers). A method without
a rule is refused to everyone (default deny).

The policy (``Policy.decide``): an *open* log (loopback listener, no tokens, no mTLS identities,
and the data dir's binding not recording the log as closed: the ``make run`` development log)
lets everyone do everything and says so at startup; otherwise a call without a valid credential
is UNAUTHENTICATED (reads too when ``reads = "token"``) and a credential without the needed scope
is PERMISSION_DENIED. The first credential seen closes the log in the binding (``AccessState``),
so deleting the tokens file or revoking the last token never reopens it.

``FailureThrottle`` counts failed authentications per client address; it is consulted before a
presented token is even parsed, so a guessing client costs a dictionary lookup per attempt.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ledger.core.errors import (
    FormatError,
    NotFoundError,
    PermissionDeniedError,
    PushbackError,
    UnauthenticatedError,
)
from ledger.fileio.private import check_private_file, write_private

__all__ = [
    "ADMIN_METHODS",
    "APPEND_METHODS",
    "READ_METHODS",
    "SCOPES",
    "AccessState",
    "FailureThrottle",
    "Identity",
    "Policy",
    "RateLimiter",
    "TokenRecord",
    "TokenStore",
    "required_scope",
]

SCOPES = ("append", "admin", "read")
# Every method of ledger.v1.LedgerService has one explicit rule (a test walks the service
# descriptor); a method in none of these sets is refused for everyone: default deny.
APPEND_METHODS = frozenset({"AppendRecords", "StreamAppend", "AppendPacked"})
ADMIN_METHODS = frozenset({"AnchorNow", "Backup"})
READ_METHODS = frozenset({
    "GetCheckpoint", "GetInclusionProof", "GetInclusionProofs", "GetConsistencyProof",
    "GetEntries", "GetEntry", "GetAnchors", "GetReceipts", "ListAnchoredSizes",
})  # fmt: skip
_LEDGER_SERVICE = "ledger.v1.LedgerService"
# The other services the server registers, whole: reads (health probes stay open).
_READ_SERVICES = frozenset({
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
})  # fmt: skip
_TOKEN = re.compile(r"^dl_([0-9a-f]{8})_[A-Za-z0-9_-]{43}$")
_ALWAYS_OPEN = ("/grpc.health.v1.Health/",)  # load balancers probe without credentials
_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")


def required_scope(method: str) -> str | None:
    """The scope a ``/package.Service/Method`` needs (None: a read); raises
    ``PermissionDeniedError`` for a method without a rule (default deny)."""
    service, _, name = method.rpartition("/")
    service = service.lstrip("/")
    if service in _READ_SERVICES:
        return None
    if service == _LEDGER_SERVICE:
        if name in READ_METHODS:
            return None
        if name in APPEND_METHODS:
            return "append"
        if name in ADMIN_METHODS:
            return "admin"
    raise PermissionDeniedError(f"{method}: no access rule for this method; denied")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """An authenticated caller: ``token:<name>``, ``mtls:<CN>`` or ``anonymous``."""

    name: str
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        return scope in self.scopes or "admin" in self.scopes


ANONYMOUS = Identity(name="anonymous", scopes=frozenset())
_OPEN = Identity(name="anonymous", scopes=frozenset(SCOPES))


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRecord:
    """One token as stored: never the token itself."""

    id: str
    name: str
    scopes: tuple[str, ...]
    created: int
    sha256: str
    expires: int | None = None  # unix seconds; None: never

    def expired(self, now: float) -> bool:
        """Whether the token is past its expiry at ``now`` (unix seconds)."""
        return self.expires is not None and now >= self.expires

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "id": self.id,
            "name": self.name,
            "scopes": list(self.scopes),
            "created": self.created,
            "sha256": self.sha256,
        }
        if self.expires is not None:
            out["expires"] = self.expires
        return out


class TokenStore:
    """The tokens file; re-read when it changes (a revoke takes effect within a second)."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, TokenRecord] = {}
        self._stamp: tuple[int, int] | None = None
        self._checked = float("-inf")
        self._reload()

    def records(self) -> list[TokenRecord]:
        self._maybe_reload()
        return sorted(self._records.values(), key=lambda r: (r.created, r.name))

    def lookup(self, token: str) -> TokenRecord | None:
        """The record of a presented token (constant-time comparison of the hash)."""
        match = _TOKEN.match(token)
        if match is None:
            return None
        self._maybe_reload()
        record = self._records.get(match.group(1))
        if record is None or not hmac.compare_digest(record.sha256, _digest(token)):
            return None
        return record

    def create(
        self, name: str, scopes: Sequence[str], *, now: int, expires: int | None = None
    ) -> tuple[str, TokenRecord]:
        """Add a token (valid until ``expires``, unix seconds, if given); return it (shown
        once) and its record."""
        if expires is not None and expires <= now:
            raise FormatError(f"expiry {expires} is not after now ({now})")
        if not _NAME.match(name):
            raise FormatError(f"token name {name!r}: want 1-64 of A-Z a-z 0-9 . _ @ -")
        bad = [s for s in scopes if s not in SCOPES]
        if bad or not scopes:
            raise FormatError(f"scopes {list(scopes)}: want one or more of {', '.join(SCOPES)}")
        with self._lock:
            self._reload()
            if any(r.name == name for r in self._records.values()):
                raise FormatError(f"a token named {name!r} exists; revoke it first")
            token_id = secrets.token_hex(4)
            secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
            token = f"dl_{token_id}_{secret}"
            record = TokenRecord(
                id=token_id,
                name=name,
                scopes=tuple(dict.fromkeys(scopes)),
                created=now,
                sha256=_digest(token),
                expires=expires,
            )
            self._records[token_id] = record
            self._save()
        return token, record

    def revoke(self, name_or_id: str) -> TokenRecord:
        with self._lock:
            self._reload()
            for record in list(self._records.values()):
                if name_or_id in (record.name, record.id):
                    del self._records[record.id]
                    self._save()
                    return record
        raise NotFoundError(f"no token named {name_or_id!r}")

    def _maybe_reload(self) -> None:
        now = self._clock()
        if now - self._checked < 1.0:
            return
        with self._lock:
            self._checked = now
            self._reload()

    def _reload(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._records, self._stamp = {}, None
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        check_private_file(self.path, "tokens file")
        try:
            doc = json.loads(self.path.read_bytes().decode("utf-8"))
            records = [
                TokenRecord(
                    id=str(r["id"]),
                    name=str(r["name"]),
                    scopes=tuple(str(s) for s in r["scopes"]),
                    created=int(r["created"]),
                    sha256=str(r["sha256"]),
                    expires=None if r.get("expires") is None else int(r["expires"]),
                )
                for r in doc["tokens"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise FormatError(f"tokens file {self.path} does not parse: {exc}") from None
        self._records = {r.id: r for r in records}
        self._stamp = stamp

    def _save(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        doc = {"tokens": [r.to_json() for r in self._records.values()]}
        write_private(self.path, json.dumps(doc, indent=2))
        st = self.path.stat()
        self._stamp = (st.st_mtime_ns, st.st_size)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


@dataclass(slots=True)
class RateLimiter:
    """A token bucket per identity: ``rate`` calls per second, ``burst`` at once (0: off)."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def take(self, who: str) -> None:
        """Spend one call of ``who``'s bucket, or raise ``PushbackError`` with the wait."""
        if self.rate <= 0:
            return
        now = self.clock()
        bucket = self._buckets.get(who)
        if bucket is None:
            if len(self._buckets) > 100_000:  # bounded memory: forget idle callers
                self._buckets.clear()
            bucket = self._buckets[who] = _Bucket(tokens=float(self.burst), at=now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
        bucket.at = now
        if bucket.tokens < 1.0:
            wait = (1.0 - bucket.tokens) / self.rate
            raise PushbackError(
                f"rate limit of {who}: {self.rate:g} calls/s (burst {self.burst})",
                retry_after=wait,
            )
        bucket.tokens -= 1.0


@dataclass(slots=True)
class _Failures:
    count: int
    since: float


@dataclass(slots=True)
class FailureThrottle:
    """At most ``limit`` failed authentications per client address in ``window_s`` seconds;
    then ``check`` refuses that address (``PushbackError``: RESOURCE_EXHAUSTED with the wait)
    until the window has passed. ``limit`` 0: off."""

    limit: int
    window_s: float
    clock: Callable[[], float] = time.monotonic
    _seen: dict[str, _Failures] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, address: str) -> None:
        """Refuse ``address`` while it is over its failure limit."""
        if self.limit <= 0:
            return
        seen = self._seen.get(address)
        if seen is None or seen.count < self.limit:
            return
        wait = seen.since + self.window_s - self.clock()
        if wait <= 0:
            return
        raise PushbackError(
            f"too many failed authentications from this address ({seen.count} in "
            f"{self.window_s:g} s): retry after the wait, with a valid token",
            retry_after=wait,
        )

    def failed(self, address: str) -> None:
        """Count one failed authentication of ``address``."""
        if self.limit <= 0:
            return
        now = self.clock()
        with self._lock:
            seen = self._seen.get(address)
            if seen is None or now - seen.since >= self.window_s:
                if len(self._seen) >= 100_000:  # bounded memory: drop finished windows
                    self._seen = {
                        a: f for a, f in self._seen.items() if now - f.since < self.window_s
                    }
                self._seen[address] = _Failures(count=1, since=now)
                return
            seen.count += 1


class AccessState(Protocol):
    """The data dir's record of whether the log requires credentials
    (``ledger.ops.binding.AccessWatch``)."""

    def closed(self) -> bool: ...

    def close(self, reason: str) -> None: ...


_HOW_TO_PROCEED = (
    "create one with `ledger token create --data-dir <data dir> --name <who> --scope append`, "
    "or reopen the log deliberately with `ledger access open --data-dir <data dir> "
    "--reason <why>`"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """Decides, per call, who the caller is and whether it may make the call."""

    tokens: TokenStore | None
    mtls: Mapping[str, Sequence[str]]
    loopback: bool
    reads_need_token: bool
    access: AccessState | None = None
    clock: Callable[[], float] = time.time  # token expiry

    @property
    def open_log(self) -> bool:
        """Open while on loopback with no token and no mTLS identity configured and the binding
        not closed; the first token closes it for good (recorded in the binding within a
        second, without a restart): only ``ledger access open`` reopens it."""
        if not self.loopback or self.mtls:
            self.close_if_credentials()
            return False
        if self.tokens is not None and self.tokens.records():
            self.close_if_credentials()
            return False
        return self.access is None or not self.access.closed()

    def close_if_credentials(self) -> None:
        """Record the log as closed in the binding when a credential is configured."""
        if self.access is None or self.access.closed():
            return
        if self.tokens is not None and self.tokens.records():
            self.access.close(f"a token exists in {self.tokens.path}")
        elif self.mtls:
            self.access.close("mTLS identities are configured")

    def _usable_credentials(self) -> bool:
        if self.mtls:
            return True
        now = self.clock()
        return self.tokens is not None and any(not r.expired(now) for r in self.tokens.records())

    @property
    def mode(self) -> str:
        """For the startup line."""
        if self.open_log:
            return "open (loopback development log, no tokens configured: anyone may append)"
        mode = "token" + (" (reads too)" if self.reads_need_token else " (reads open)")
        if self.access is not None and self.access.closed() and not self._usable_credentials():
            mode += "; closed with no usable token: every write is refused"
        return mode

    def identify(self, bearer: str | None, peer_cn: str | None) -> Identity | None:
        """The caller's identity from a bearer token or a client-certificate CN (None: none).
        Raises ``UnauthenticatedError`` for a token that is presented but not valid."""
        if bearer is not None:
            record = self.tokens.lookup(bearer) if self.tokens else None
            if record is None:
                raise UnauthenticatedError("invalid or revoked token")
            if record.expired(self.clock()):
                raise UnauthenticatedError(
                    f"token expired (token {record.name!r}; ask for a new one)"
                )
            return Identity(name=f"token:{record.name}", scopes=frozenset(record.scopes))
        if peer_cn is not None and peer_cn in self.mtls:
            return Identity(name=f"mtls:{peer_cn}", scopes=frozenset(self.mtls[peer_cn]))
        return None

    def decide(self, method: str, bearer: str | None, peer_cn: str | None) -> Identity:
        """The identity allowed to make ``method``; raises Unauthenticated/PermissionDenied."""
        return self.authorize(method, self.identify(bearer, peer_cn))

    def authorize(self, method: str, identity: Identity | None) -> Identity:
        """The identity (or anonymous) if it may make ``method``, else raise."""
        scope = required_scope(method)
        if self.open_log:
            return identity or _OPEN
        if identity is None:
            open_read = not self.reads_need_token or method.startswith(_ALWAYS_OPEN)
            if scope is None and open_read:
                return ANONYMOUS
            what = "this call" if scope is None else f"{method.rpartition('/')[2]}"
            if self.access is not None and self.access.closed() and not self._usable_credentials():
                raise UnauthenticatedError(
                    f"{what} needs a credential: this log is closed (recorded in its data "
                    f"dir's binding) and has no usable token: {_HOW_TO_PROCEED}"
                )
            raise UnauthenticatedError(
                f"{what} needs a credential (a bearer token in the authorization metadata, "
                "or a client certificate)"
            )
        needed = scope or ("read" if self.reads_need_token else None)
        if scope is None and method.startswith(_ALWAYS_OPEN):
            needed = None
        if needed is not None and not identity.allows(needed):
            raise PermissionDeniedError(
                f"{identity.name} lacks the {needed!r} scope for {method.rpartition('/')[2]}"
            )
        return identity
