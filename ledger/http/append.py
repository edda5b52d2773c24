"""``POST /append``: a decision record as JSON over HTTP, for agents not written in Python.

docs/sdk.md "Agents in other languages". The body is one decision record (JSON, at most
``MAX_RECORD_BYTES`` in its RFC 8785 form); the answer is its receipt as JSON
(``decision-ledger/receipt/v1``, unanchored: ``ledger receipt upgrade`` adds anchors later),
which ``ledger-verify receipt`` checks. The same rules as the gRPC ``AppendRecords``:

* credentials: ``Authorization: Bearer <token>`` with the ``append`` scope (the
  ``ledger.api.auth`` policy, method ``AppendRecords``; an open development log lets everyone
  append); 401 (``WWW-Authenticate: Bearer``) without or with a bad token, 403 without the
  scope; failed authentications throttled per client address, appends rate-limited per identity
  (429 with ``Retry-After``);
* the record is validated against the published JSON Schema of its version
  (``ledger/records/schemas/decision-record-v<N>.schema.json``, with ``jsonschema``: 400 naming
  the record's path and the schema's), then by ``ledger.records`` (the same rules, and those the
  schema states in its ``$comment`` only): 400 naming the field, 413 over the size limit, 415
  for a body that is not ``application/json``;
* the request holds its size (``Content-Length``, else ``MAX_BODY_BYTES``) in the server's one
  in-flight byte budget (``ledger.api.budget``, shared with gRPC) until it is answered, waiting
  a moment for room: 503 with ``Retry-After`` when there is none; each request is one line of
  the access log (``ledger.api.access``: method ``POST /append``, the HTTP status);
* the log's queue and pushback (429), durability (answered once durable) and a checkpoint
  covering the entry (503 when none comes in time: the entry is durable, repeat the request:
  appends are idempotent by record digest).

Errors are JSON ``{"error": <message>}``; never a 500 for anything a client sends.
"""

from __future__ import annotations

import base64
import functools
import json
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import web

from ledger.api.access import log_access
from ledger.api.auth import FailureThrottle, Identity, Policy, RateLimiter
from ledger.api.budget import ByteBudget
from ledger.core.errors import (
    InvalidRecordError,
    LedgerError,
    PermissionDeniedError,
    PushbackError,
    UnauthenticatedError,
    UnsupportedSchemaError,
)
from ledger.core.jcs import Json, loads_strict
from ledger.core.limits import MAX_RECORD_BYTES
from ledger.core.types import AppendItem, ReceiptBundle
from ledger.log.service import LogService
from ledger.records.decision import (
    SCHEMA_VERSION,
    DecisionRecord,
    record_digest,
    schema_version,
)

__all__ = [
    "APPEND_METHOD",
    "APPEND_PATH",
    "MAX_BODY_BYTES",
    "AppendRoute",
    "receipt_json",
    "schema_problem",
]

APPEND_PATH = "/append"
APPEND_METHOD = "/ledger.v1.LedgerService/AppendRecords"  # the same access rule as gRPC
RECEIPT_V1 = "decision-ledger/receipt/v1"
# The JSON text may be indented or escaped more than its RFC 8785 form, which is what the
# record limit bounds (checked after parsing).
MAX_BODY_BYTES = 2 * MAX_RECORD_BYTES
BUDGET_WAIT_S = 1.0  # how long a request waits for room in the byte budget (as gRPC reads do)
ACCESS_METHOD = f"POST {APPEND_PATH}"
_JSON = "application/json"


@functools.cache
def _validator(version: int) -> Any:
    """The ``jsonschema`` validator of ``decision-record-v<version>.schema.json``, built at the
    first ``POST /append`` that needs it (``jsonschema`` loads then too: ~0.13 s of CPU that a
    server taking no HTTP appends never pays)."""
    import jsonschema

    name = f"decision-record-v{version}.schema.json"
    text = resources.files("ledger.records").joinpath("schemas", name).read_text("utf-8")
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_problem(value: Json) -> str | None:
    """Why ``value`` does not match the published JSON Schema of the version it names (the
    newest when it names none), naming the record's path (``$.usage.input_tokens``) and the
    schema's; None when it matches, or names a newer version than this server reads
    (``ledger.records`` says "unsupported schema version")."""
    try:
        version = schema_version(value.get("schema") if isinstance(value, dict) else None)
    except UnsupportedSchemaError:
        return None
    except InvalidRecordError:
        version = SCHEMA_VERSION
    validator = _validator(version)
    from jsonschema.exceptions import best_match  # loaded by ``_validator``

    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_schema_path)
    name = f"decision-record-v{version}.schema.json"
    return f"{error.json_path}: {error.message} (schema {name}#/{where})"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def receipt_json(record: DecisionRecord, bundle: ReceiptBundle) -> dict[str, Json]:
    """The receipt (``decision-ledger/receipt/v1``) of ``record`` from a one-proof bundle."""
    proof = bundle.proofs[0]
    return {
        "receipt": RECEIPT_V1,
        "record_digest": proof.entry.record_digest.hex(),
        "record": record.to_json_obj(),
        "disclosures": [],
        "leaf": _b64(proof.entry.leaf),
        "index": proof.entry.index,
        "tree_size": proof.tree_size,
        "inclusion_proof": [_b64(h) for h in proof.hashes],
        "checkpoint": bundle.checkpoint.note,
        "anchors": [],
        "previous": None,
    }


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


@dataclass(slots=True)
class AppendRoute:
    """The handler and what it shares with the gRPC server (policy, limiter, throttle)."""

    service: LogService
    policy: Policy
    limiter: RateLimiter
    throttle: FailureThrottle | None = None
    checkpoint_timeout: float = 10.0
    budget: ByteBudget | None = None  # the gRPC server's in-flight budget (one for both)
    access_log: bool = True

    def mount(self, app: web.Application) -> None:
        app.router.add_post(APPEND_PATH, self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        start = time.perf_counter()
        seen: list[Identity] = []
        response = await self._handle(request, seen)
        if self.access_log:
            who = seen[-1].name if seen else "unauthenticated"
            peer = _peer(request)
            elapsed = time.perf_counter() - start
            log_access(ACCESS_METHOD, str(response.status), elapsed, who, peer)
        return response

    async def _handle(self, request: web.Request, seen: list[Identity]) -> web.Response:
        try:
            seen.append(self._admit(request))
        except UnauthenticatedError as exc:
            return _error(401, str(exc), **{"WWW-Authenticate": "Bearer"})
        except PermissionDeniedError as exc:
            return _error(403, str(exc))
        except PushbackError as exc:
            return _error(429, str(exc), **{"Retry-After": _seconds(exc)})
        if request.content_type != _JSON:
            return _error(415, f"send the record as {_JSON}, not {request.content_type!r}")
        length = request.content_length
        if length is not None and length > MAX_BODY_BYTES:
            return _error(413, f"the body exceeds {MAX_BODY_BYTES} bytes")
        held = MAX_BODY_BYTES if length is None else length
        if self.budget is not None:
            try:
                await self.budget.reserve(held, "an HTTP append", BUDGET_WAIT_S)
            except PushbackError as exc:
                return _error(503, str(exc), **{"Retry-After": _seconds(exc)})
        try:
            return await self._read_and_append(request)
        finally:
            if self.budget is not None:
                self.budget.give(held)

    async def _read_and_append(self, request: web.Request) -> web.Response:
        body = await _body(request, MAX_BODY_BYTES)
        if body is None:
            return _error(413, f"the body exceeds {MAX_BODY_BYTES} bytes")
        try:
            value = loads_strict(body, safe_numbers=True)
        except LedgerError as exc:
            return _error(400, f"not a JSON record: {exc}")
        problem = schema_problem(value)
        if problem is not None:
            return _error(400, f"invalid record: {problem}")
        try:
            record = DecisionRecord.from_json_obj(value, checked=True)
        except (InvalidRecordError, UnsupportedSchemaError) as exc:
            return _error(400, f"invalid record: {exc}")
        except LedgerError as exc:
            return _error(400, f"not a JSON record: {exc}")
        text = record.to_json().encode("utf-8")
        if len(text) > MAX_RECORD_BYTES:
            return _error(413, f"the record is {len(text)} bytes, over {MAX_RECORD_BYTES}")
        return await self._append(record)

    def _admit(self, request: web.Request) -> Identity:
        host = request.remote or "unknown"
        if self.throttle is not None:
            self.throttle.check(host)
        header = request.headers.get("Authorization")
        bearer = None
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise UnauthenticatedError("Authorization: want 'Bearer <token>'")
            bearer = value.strip()
        try:
            known = self.policy.identify(bearer, None)
        except UnauthenticatedError:
            if self.throttle is not None:
                self.throttle.failed(host)
            raise
        identity = self.policy.authorize(APPEND_METHOD, known)
        self.limiter.take(identity.name if identity.name != "anonymous" else host)
        return identity

    async def _append(self, record: DecisionRecord) -> web.Response:
        digest = record_digest(record)
        try:
            (result,) = await self.service.append([AppendItem(digest)])
            await self.service.wait_for_checkpoint(result.index + 1, self.checkpoint_timeout)
            bundle = await self.service.receipts([digest], 0, prefer_anchored=False)
        except PushbackError as exc:
            return _error(429, str(exc), **{"Retry-After": _seconds(exc)})
        except LedgerError as exc:
            return _error(503, str(exc))
        status = 200 if result.duplicate else 201
        body: dict[str, Any] = receipt_json(record, bundle)
        return web.json_response(body, status=status, content_type=_JSON)


def _peer(request: web.Request) -> str:
    """The client as gRPC names its peers (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``)."""
    name = request.transport.get_extra_info("peername") if request.transport else None
    if not isinstance(name, tuple) or len(name) < 2:
        return request.remote or "?"
    host, port = name[0], name[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


async def _body(request: web.Request, limit: int) -> bytes | None:
    """The request body, read in chunks; None once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    total = 0
    while chunk := await request.content.read(1 << 16):
        total += len(chunk)
        if total > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _seconds(exc: PushbackError) -> str:
    wait = getattr(exc, "retry_after", None) or 1
    return str(max(1, round(float(wait))))
