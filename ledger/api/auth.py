"""Who may call what: bearer tokens (stored only as hashes), mTLS identities, scopes, and
per-identity token-bucket rate limits. No grpc here: ``ledger.api.interceptor`` adapts it.

Tokens look like ``dl_<id>_<secret>`` (id: 8 hex digits, secret: 32 random bytes, base64url);
the tokens file (JSON, mode 0600) keeps, per token, its id, name, scopes, creation time and
SHA-256 of the whole token, never the token. Scopes: ``append`` (AppendRecords, StreamAppend),
``admin`` (AnchorNow, Backup, and everything ``append`` may do), ``read`` (reads, only needed
when ``[auth] reads = "token"``; health checks stay open for load balancers).

The policy (``Policy.decide``): an *open* log (loopback listener, no tokens, no mTLS identities:
the ``make run`` development log) lets everyone do everything and says so at startup; otherwise
a call without a valid credential is UNAUTHENTICATED (reads too when ``reads = "token"``) and
a credential without the needed scope is PERMISSION_DENIED.
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
    "SCOPES",
    "Identity",
    "Policy",
    "RateLimiter",
    "TokenRecord",
    "TokenStore",
    "required_scope",
]

SCOPES = ("append", "admin", "read")
APPEND_METHODS = frozenset({"AppendRecords", "StreamAppend"})
ADMIN_METHODS = frozenset({"AnchorNow", "Backup"})
_TOKEN = re.compile(r"^dl_([0-9a-f]{8})_[A-Za-z0-9_-]{43}$")
_ALWAYS_OPEN = ("/grpc.health.v1.Health/",)  # load balancers probe without credentials
_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")


def required_scope(method: str) -> str | None:
    """The scope a ``/package.Service/Method`` needs (None: a read)."""
    service, _, name = method.rpartition("/")
    if not service.endswith("ledger.v1.LedgerService"):
        return None  # health, reflection: reads
    if name in ADMIN_METHODS:
        return "admin"
    if name in APPEND_METHODS:
        return "append"
    return None


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

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "scopes": list(self.scopes),
            "created": self.created,
            "sha256": self.sha256,
        }


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

    def create(self, name: str, scopes: Sequence[str], *, now: int) -> tuple[str, TokenRecord]:
        """Add a token; return it (shown once) and its record."""
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """Decides, per call, who the caller is and whether it may make the call."""

    tokens: TokenStore | None
    mtls: Mapping[str, Sequence[str]]
    loopback: bool
    reads_need_token: bool

    @property
    def open_log(self) -> bool:
        """Open while on loopback with no token and no mTLS identity configured; the first
        ``ledger token create`` closes it (within a second, without a restart)."""
        if not self.loopback or self.mtls:
            return False
        return self.tokens is None or not self.tokens.records()

    @property
    def mode(self) -> str:
        """For the startup line."""
        if self.open_log:
            return "open (loopback development log, no tokens configured: anyone may append)"
        return "token" + (" (reads too)" if self.reads_need_token else " (reads open)")

    def identify(self, bearer: str | None, peer_cn: str | None) -> Identity | None:
        """The caller's identity from a bearer token or a client-certificate CN (None: none).
        Raises ``UnauthenticatedError`` for a token that is presented but not valid."""
        if bearer is not None:
            record = self.tokens.lookup(bearer) if self.tokens else None
            if record is None:
                raise UnauthenticatedError("invalid or revoked token")
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
