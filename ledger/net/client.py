"""The server side's one outbound HTTP client (aiohttp): the TSA client and witnessing use it.

``HttpClient`` is one aiohttp session (one connection pool) on the running event loop;
``post_blocking`` is the same request for synchronous callers on a worker thread (the anchorer
asks its TSAs there): a short-lived loop and session per call, as TSA calls are rare.

The proxy variables (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``) are honoured, as urllib
did for the TSA client. Every request has a total timeout and a response-size cap; the body is
read in chunks and refused past the cap, so an untrusted server cannot make the log buffer more
than the cap.
Failures are the error tree's (``ledger.core.errors``); an answered status, whatever it is, is a
``Reply`` for the caller to judge:

- refused, unreachable, reset, a malformed answer -> ``UnavailableError`` (retryable);
- no complete answer within the timeout -> ``DeadlineExceededError`` (retryable);
- a body over the cap -> ``RemoteError`` (``status`` ``"HTTP <code>"``, not retryable).

Messages show URLs through ``ledger.core.redact`` (no userinfo, no query).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import aiohttp

from ledger.core.errors import DeadlineExceededError, RemoteError, UnavailableError
from ledger.core.redact import redact_text, redact_url

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_TIMEOUT_S",
    "HttpClient",
    "Reply",
    "post_blocking",
]

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_BYTES = 1024 * 1024
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """An answer: its status, media type (lower case, no parameters; "" without one), body."""

    status: int
    content_type: str
    body: bytes


async def _read_capped(response: aiohttp.ClientResponse, url: str, max_bytes: int) -> bytes:
    chunks, got = [], 0
    while chunk := await response.content.read(max_bytes + 1 - got):
        chunks.append(chunk)
        got += len(chunk)
        if got > max_bytes:
            raise RemoteError(
                f"{redact_url(url)} answered HTTP {response.status} with over {max_bytes} bytes",
                status=f"HTTP {response.status}",
                retryable=False,
            )
    return b"".join(chunks)


class HttpClient:
    """One aiohttp session on the running event loop; ``async with`` or ``close()`` it."""

    def __init__(self) -> None:
        self._session = aiohttp.ClientSession(trust_env=True)

    async def post(
        self,
        url: str,
        body: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> Reply:
        """POST ``body`` to ``url``; the answer within ``timeout_s`` and ``max_bytes``."""
        try:
            async with self._session.post(
                url,
                data=body,
                headers=dict(headers or {}),
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                data = await _read_capped(response, url, max_bytes)
                kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
                return Reply(status=response.status, content_type=kind, body=data)
        except TimeoutError:
            raise DeadlineExceededError(
                f"{redact_url(url)} did not answer within {timeout_s:g} s"
            ) from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            detail = redact_text(str(exc)) or type(exc).__name__
            raise UnavailableError(f"{redact_url(url)} unreachable: {detail}") from exc

    async def close(self) -> None:
        """Close the session and its connections."""
        await self._session.close()

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


async def _post_once(url: str, body: bytes, kwargs: dict[str, Any]) -> Reply:
    async with HttpClient() as client:
        return await client.post(url, body, **kwargs)


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion on a loop of its own (a worker thread when this thread already
    runs one: a synchronous caller on an event loop must not nest it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-http") as pool:
        return pool.submit(asyncio.run, coro).result()


def post_blocking(
    url: str,
    body: bytes,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Reply:
    """``HttpClient.post`` for a synchronous caller (same limits, same errors)."""
    kwargs = {"headers": headers, "timeout_s": timeout_s, "max_bytes": max_bytes}
    return _run(_post_once(url, body, kwargs))
