"""The gRPC server interceptor: authentication, scopes, rate limits and the access log.

Every call first passes the failed-authentication throttle of its client address
(``ledger.api.auth.FailureThrottle``: cheap, before any token is looked at), then
``ledger.api.auth.Policy.decide`` (bearer token from the ``authorization``
metadata, ``Bearer <token>``; or the client certificate's common name under mTLS) and the
caller's token bucket before the handler runs; refusals travel as the status ``ledger.api.wire``
gives their error class (UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED with
``retry-after-ms``). Each finished call is one access-log line on the ``ledger.access`` logger
(``ledger.api.access``: method, status, duration, identity, peer): the token itself is never
logged, nor echoed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

import grpc

from ledger.api import wire
from ledger.api.access import log_access
from ledger.api.auth import FailureThrottle, Identity, Policy, RateLimiter
from ledger.core.errors import LedgerError, UnauthenticatedError
from ledger.log.metrics import LedgerMetrics

__all__ = ["AuthInterceptor", "WrapOnce"]

Context = grpc.aio.ServicerContext[Any, Any]
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


def _bearer(context: Context) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return None


def _peer_cn(context: Context) -> str | None:
    names = list(context.auth_context().get("x509_common_name", ()))
    return names[0].decode() if names else None


def _peer_host(context: Context) -> str:
    peer = context.peer() or "?"
    return peer.rsplit(":", 1)[0]


class WrapOnce(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """An interceptor that wraps each method's handler once (``_wrap``) and hands out that
    wrapper for as long as grpc continues to the same handler (not a new wrapper per call)."""

    def __init__(self) -> None:
        # per method: the handler continued to and its wrapped form
        self._wrapped: dict[str, tuple[Any, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        if handler is None:
            return None
        method = str(details.method)
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = self._wrap(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: Any) -> Any:
        raise NotImplementedError


class AuthInterceptor(WrapOnce):
    """Wraps every method handler: decide, limit, run, log."""

    def __init__(
        self,
        policy: Policy,
        limiter: RateLimiter,
        metrics: LedgerMetrics | None = None,
        *,
        access_log: bool = True,
        throttle: FailureThrottle | None = None,
    ) -> None:
        self._access_log = access_log
        self._throttle = throttle
        self._policy = policy
        self._limiter = limiter
        self._metrics = metrics
        super().__init__()

    def _wrap(self, method: str, handler: Handler) -> Handler:
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._streaming(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._streaming(method, handler.stream_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.stream_unary_rpc_method_handler(
            self._unary(method, handler.stream_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    async def _admit(self, method: str, context: Context, seen: list[Identity]) -> Identity:
        """Identify (``seen`` gets the identity, for the access log), authorize, rate-limit."""
        try:
            host = _peer_host(context)
            if self._throttle is not None:
                self._throttle.check(host)
            try:
                known = self._policy.identify(_bearer(context), _peer_cn(context))
            except UnauthenticatedError:
                if self._throttle is not None:
                    self._throttle.failed(host)
                raise
            if known is not None:
                seen.append(known)
            identity = self._policy.authorize(method, known)
            who = identity.name if identity.name != "anonymous" else host
            self._limiter.take(who)
        except LedgerError as exc:
            context.set_trailing_metadata(wire.retry_trailer(exc))
            await context.abort(wire.status_of(exc), str(exc))
        return identity

    def _unary(self, method: str, behaviour: Any) -> Any:
        async def run(request: Any, context: Context) -> Any:
            start = time.perf_counter()
            seen: list[Identity] = []
            status = "OK"
            try:
                seen.append(await self._admit(method, context, seen))
                return await behaviour(request, context)
            except BaseException:
                status = _status(context)
                raise
            finally:
                self._log(method, status, start, seen[-1] if seen else None, context)

        return run

    def _streaming(self, method: str, behaviour: Any) -> Any:
        async def run(request: Any, context: Context) -> AsyncIterator[Any]:
            start = time.perf_counter()
            seen: list[Identity] = []
            status = "OK"
            try:
                seen.append(await self._admit(method, context, seen))
                async for response in behaviour(request, context):
                    yield response
            except BaseException:
                status = _status(context)
                raise
            finally:
                self._log(method, status, start, seen[-1] if seen else None, context)

        return run

    def _log(
        self, method: str, status: str, start: float, identity: Identity | None, ctx: Context
    ) -> None:
        elapsed = time.perf_counter() - start
        who = identity.name if identity else "unauthenticated"
        if self._metrics is not None:
            self._metrics.observe_rpc(method.rpartition("/")[2], status, elapsed)
        if not self._access_log:
            return
        log_access(method, status, elapsed, who, ctx.peer() or "?")


def _status(context: Context) -> str:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    return "CANCELLED" if context.cancelled() else "UNKNOWN"
