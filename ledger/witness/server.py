"""The witness over HTTP (c2sp.org/tlog-witness): ``POST <prefix>/add-checkpoint`` with aiohttp.

``create_witness_app`` wraps a ``ledger.witness.state.Witness``; the decision and its durable
write run on a worker thread, so the event loop keeps accepting requests while one is fsynced.
Bodies over ``MAX_BODY_BYTES`` get 413; other methods 405 (aiohttp). A body that has not fully
arrived ``body_timeout_s`` seconds after the request head (default ``BODY_TIMEOUT_S``) gets 408
and the connection is closed; a client that leaves before its body is complete is dropped with
one debug line, never a traceback. Connections come through ``ledger.net.listener``: a
request head slower than ``header_timeout_s`` is closed, and past ``max_connections`` (in all)
or ``max_per_address`` a connection is answered 503. Every refusal has a text body saying what
is wrong; a 409 for a stale old size carries ``text/x.tlog.size``.

``WitnessSettings`` is the witness's configuration as plain values; ``ledger witness serve``
builds it from the settings model (``ledger.app.settings.WitnessServeSettings``: the
``[witness]`` TOML table, ``LEDGER_WITNESS_*`` variables and flags).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from ledger.core.checkpoint import CosignatureSigner, Ed25519Verifier, Verifier
from ledger.core.errors import FormatError, MalformedKeyError
from ledger.fileio.keys import read_key_text
from ledger.net.listener import HttpListener, ListenerLimits, serve_limited
from ledger.witness.core import MAX_BODY_BYTES
from ledger.witness.state import Witness

_log = logging.getLogger("ledger.witness")

BODY_TIMEOUT_S = 10.0
"""Seconds a request's body may take to arrive after its head (a checkpoint is a few KiB)."""

__all__ = [
    "BODY_TIMEOUT_S",
    "LogKeys",
    "WitnessSettings",
    "create_witness_app",
    "open_witness",
    "run_witness",
    "split_listen",
    "start_witness_server",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LogKeys:
    """A log the witness cosigns: its origin and verifier key strings (type 0x01)."""

    origin: str
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessSettings:
    """The configuration of ``ledger witness serve``."""

    key_file: Path = Path("witness.key")
    state_dir: Path = Path("witness-data")
    listen: str = "127.0.0.1:7380"
    logs: tuple[LogKeys, ...] = field(default=())
    body_timeout_s: float = BODY_TIMEOUT_S
    header_timeout_s: float = BODY_TIMEOUT_S
    max_connections: int = 256
    max_per_address: int = 32

    @property
    def limits(self) -> ListenerLimits:
        """Timeouts and connection caps of the listener (``ledger.net.listener``)."""
        return ListenerLimits(
            header_timeout_s=self.header_timeout_s,
            body_timeout_s=self.body_timeout_s,
            max_connections=self.max_connections,
            max_per_address=self.max_per_address,
        )

    def verifiers(self) -> dict[str, list[Verifier]]:
        """Origin -> parsed verifier keys; MalformedKeyError names the bad key."""
        out: dict[str, list[Verifier]] = {}
        for log in self.logs:
            for text in log.keys:
                try:
                    out.setdefault(log.origin, []).append(Ed25519Verifier.from_key_string(text))
                except MalformedKeyError as exc:
                    raise MalformedKeyError(f"log {log.origin!r}: {exc}") from None
        return out


def open_witness(settings: WitnessSettings, *, clock: Callable[[], float] = time.time) -> Witness:
    """The witness of ``settings``: its signer key, known logs and state folder."""
    signer = CosignatureSigner.from_key_string(read_key_text(settings.key_file, "witness key"))
    logs = settings.verifiers()
    if not logs:
        raise FormatError("no log to witness: give [[witness.log]] entries or --log VKEY")
    return Witness(folder=settings.state_dir, signer=signer, logs=logs, clock=clock)


def create_witness_app(
    witness: Witness, *, prefix: str = "", body_timeout_s: float = BODY_TIMEOUT_S
) -> web.Application:
    """An aiohttp application serving ``POST <prefix>/add-checkpoint``; a body slower than
    ``body_timeout_s`` gets 408."""

    async def add_checkpoint(request: web.Request) -> web.StreamResponse:
        try:
            body = await asyncio.wait_for(request.read(), body_timeout_s)
        except TimeoutError:
            response = web.Response(
                status=408, text=f"the request body did not arrive within {body_timeout_s:g} s\n"
            )
            response.force_close()
            await response.prepare(request)
            await response.write_eof()
            if request.transport is not None:  # no lingering for the rest of the body
                request.transport.close()
            return response
        except ConnectionError:  # the client left before its body was complete
            _log.debug("add-checkpoint: the client left before sending its body")
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=400, text="the request body was cut short\n")
        loop = asyncio.get_running_loop()
        try:
            decision = await loop.run_in_executor(None, witness.add_checkpoint, body)
        except OSError as exc:  # the state could not be stored: nothing was cosigned
            _log.error("cannot store the witness state: %s", exc)
            return web.Response(status=503, text="the witness cannot store its state; retry\n")
        return web.Response(
            status=decision.status,
            body=decision.body.encode(),
            headers={"Content-Type": decision.content_type},
        )

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post(f"{prefix}/add-checkpoint", add_checkpoint)
    return app


async def start_witness_server(
    witness: Witness,
    host: str,
    port: int,
    *,
    body_timeout_s: float = BODY_TIMEOUT_S,
    limits: ListenerLimits | None = None,
) -> tuple[web.AppRunner, HttpListener]:
    """Serve ``witness`` on host:port (0 picks a free port) within ``limits`` (default: these
    defaults with ``body_timeout_s``); return the runner and the listener (``.port``). Stop
    with ``listener.close()`` then ``runner.cleanup()``."""
    limits = limits or ListenerLimits(body_timeout_s=body_timeout_s)
    app = create_witness_app(witness, body_timeout_s=limits.body_timeout_s)
    runner = web.AppRunner(app, **limits.handler_options("witness"))
    await runner.setup()
    assert runner.server is not None
    try:
        listener = await serve_limited(runner.server, host, port, limits, name="witness")
    except BaseException:
        await runner.cleanup()
        raise
    return runner, listener


def split_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); FormatError when it is not that."""
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise FormatError(f"listen {listen!r}: want HOST:PORT")
    return host, int(port)


async def run_witness(settings: WitnessSettings, on_ready: Callable[[Witness, int], None]) -> None:
    """Serve until SIGTERM or SIGINT; the state is durable after every answer."""
    host, port = split_listen(settings.listen)
    witness = open_witness(settings)
    try:
        runner, listener = await start_witness_server(witness, host, port, limits=settings.limits)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        on_ready(witness, int(listener.port))
        await stop.wait()
        await listener.close()
        await runner.cleanup()
    finally:
        witness.close()
