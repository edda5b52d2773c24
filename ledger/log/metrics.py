"""Prometheus metrics (the official ``prometheus_client``): one registry that components
register into, and the log's own metrics.

``MetricsRegistry`` is the seam: a component asks it for a counter, gauge or histogram (names
must start with ``ledger_``) or adds a collector function called at scrape time; ``exposition``
renders the text format for ``/metrics`` (``ledger.http.metrics``). ``LedgerMetrics`` defines
what the log reports:

    ledger_appended_records_total{outcome="new|duplicate"}   records appended
    ledger_append_batch_size                                  items per append request
    ledger_group_commit_seconds, ledger_group_commit_items    durable group commits
    ledger_queue_depth                                        items waiting for the writer
    ledger_tree_size, ledger_checkpoint_size                  durable / published sizes
    ledger_checkpoint_age_seconds                             since the last publish
    ledger_anchors_total{tsa}, ledger_anchor_failures_total{tsa}
    ledger_anchor_last_error{tsa,error}                       1 for the class of its last error
    ledger_rpc_requests_total{method,code}, ledger_rpc_seconds{method}
    ledger_proof_requests_total{kind="inclusion|consistency|receipts"}
    ledger_rocksdb_<property>{family}                         RocksDB properties
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ledger.core import accel
from ledger.core.errors import TimestampError

__all__ = ["CONTENT_TYPE", "LedgerMetrics", "MetricsRegistry", "ObservedSource", "error_class"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_PROOF_KINDS = {
    "GetInclusionProof": "inclusion",
    "GetInclusionProofs": "inclusion",
    "GetConsistencyProof": "consistency",
    "GetReceipts": "receipts",
}


class _FunctionCollector(Collector):
    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()


class MetricsRegistry:
    """A Prometheus registry of its own (never the process-global one, so tests and several
    servers in one process do not collide)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

    @staticmethod
    def _check(name: str) -> None:
        if not name.startswith("ledger_"):
            raise ValueError(f"metric {name!r}: names start with 'ledger_'")

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
        self._check(name)
        return Counter(name, doc, labels, registry=self.registry)

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
        self._check(name)
        return Gauge(name, doc, labels, registry=self.registry)

    def histogram(
        self, name: str, doc: str, buckets: Sequence[float], labels: Sequence[str] = ()
    ) -> Histogram:
        self._check(name)
        return Histogram(name, doc, labels, buckets=buckets, registry=self.registry)

    def add_collector(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Call ``collect`` at every scrape (values read from live objects)."""
        self.registry.register(_FunctionCollector(collect))

    def exposition(self) -> bytes:
        """The Prometheus text format of everything registered."""
        return generate_latest(self.registry)


class LedgerMetrics:
    """The log's metrics; the service, interceptor and anchorer report into it."""

    def __init__(self, registry: MetricsRegistry, *, clock: Callable[[], float] = time.time):
        self.registry = registry
        self._clock = clock
        self._lock = threading.Lock()
        self._last_publish: float | None = None
        self._last_errors: dict[str, str] = {}
        r = registry
        self.appended = r.counter("ledger_appended_records", "records appended", ["outcome"])
        self.batch_size = r.histogram(
            "ledger_append_batch_size", "items per append request", _SIZES
        )
        self.commit_seconds = r.histogram(
            "ledger_group_commit_seconds", "durable group commit latency", _LATENCIES
        )
        self.commit_items = r.histogram("ledger_group_commit_items", "items per group", _SIZES)
        self.checkpoint_size = r.gauge("ledger_checkpoint_size", "latest published size")
        self.anchors = r.counter("ledger_anchors", "timestamps obtained", ["tsa"])
        self.anchor_failures = r.counter("ledger_anchor_failures", "failed attempts", ["tsa"])
        self.rpc = r.counter("ledger_rpc_requests", "finished calls", ["method", "code"])
        self.rpc_seconds = r.histogram(
            "ledger_rpc_seconds", "call duration", _LATENCIES, ["method"]
        )
        self.proofs = r.counter("ledger_proof_requests", "proof requests", ["kind"])
        core = r.gauge("ledger_core", "1 for the core the append path runs on", ["core"])
        core.labels(accel.CORE).set(1)
        parts = r.gauge(
            "ledger_core_part", "1 for the core each compiled part runs on", ["part", "core"]
        )
        for part, name in accel.cores().items():
            parts.labels(part, name).set(1)
        r.add_collector(self._collect_errors)

    # --- hooks --------------------------------------------------------------------------------

    def on_append(self, items: int) -> None:
        self.batch_size.observe(items)

    def on_commit(self, items: int, new: int, seconds: float) -> None:
        self.commit_seconds.observe(seconds)
        self.commit_items.observe(items)
        self.appended.labels("new").inc(new)
        self.appended.labels("duplicate").inc(items - new)

    def on_publish(self, size: int) -> None:
        self.checkpoint_size.set(size)
        self._last_publish = self._clock()

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        self.rpc.labels(method, code).inc()
        self.rpc_seconds.labels(method).observe(seconds)
        kind = _PROOF_KINDS.get(method)
        if kind is not None:
            self.proofs.labels(kind).inc()

    def on_anchor(self, tsa: str, error_class: str | None) -> None:
        """Count a timestamp, or a failure of class ``error_class`` (``error_class``): a label
        value from a closed set, never an error's free text (that may quote a URL)."""
        if error_class is None:
            self.anchors.labels(tsa).inc()
            return
        self.anchor_failures.labels(tsa).inc()
        with self._lock:
            self._last_errors[tsa] = error_class

    def watch(
        self,
        *,
        queue_depth: Callable[[], int],
        tree_size: Callable[[], int],
        rocksdb: Callable[[], Mapping[str, Mapping[str, int]]],
    ) -> None:
        """Values read at scrape time from the running log."""

        def collect() -> Iterable[Metric]:
            yield GaugeMetricFamily("ledger_queue_depth", "items queued", value=queue_depth())
            yield GaugeMetricFamily("ledger_tree_size", "durable tree size", value=tree_size())
            if self._last_publish is not None:
                age = max(0.0, self._clock() - self._last_publish)
                yield GaugeMetricFamily(
                    "ledger_checkpoint_age_seconds", "since the last publish", value=age
                )
            yield from _rocksdb_families(rocksdb())

        self.registry.add_collector(collect)

    def _collect_errors(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "ledger_anchor_last_error",
            "the class of each TSA's last error",
            labels=["tsa", "error"],
        )
        with self._lock:
            for tsa, error in self._last_errors.items():
                family.add_metric([tsa, error], 1)
        yield family


def _rocksdb_families(props: Mapping[str, Mapping[str, int]]) -> Iterable[Metric]:
    names = sorted({name for values in props.values() for name in values})
    for name in names:
        metric = "ledger_rocksdb_" + name.removeprefix("rocksdb.").replace("-", "_")
        family = GaugeMetricFamily(metric, f"RocksDB property {name}", labels=["family"])
        for cf, values in sorted(props.items()):
            if name in values:
                family.add_metric([cf], values[name])
        yield family


def error_class(exc: BaseException) -> str:
    """A metric label for ``exc``: its class name, and for a ``TimestampError`` its check
    (``TimestampError/network``); an exception of ours or of a library, never its message."""
    name = type(exc).__name__
    return f"{name}/{exc.check}" if isinstance(exc, TimestampError) else name


class ObservedSource:
    """A TSA client that reports each timestamp (or failure) to ``LedgerMetrics``."""

    def __init__(self, name: str, source: Any, metrics: LedgerMetrics) -> None:
        self._name = name
        self._source = source
        self._metrics = metrics

    def timestamp(self, digest: bytes, *, at_time: datetime | None = None) -> Any:
        try:
            result = self._source.timestamp(digest, at_time=at_time)
        except Exception as exc:  # whatever a TSA does is its failure (``ledger.log.anchoring``)
            self._metrics.on_anchor(self._name, error_class(exc))
            raise
        self._metrics.on_anchor(self._name, None)
        return result


_SIZES = (1, 2, 5, 10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000)
_LATENCIES = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


def witness_metrics(status: Callable[[], Sequence[Any]], quorum_size: Callable[[], int]) -> Any:
    """A collector of the witnesses' state (``ledger.log.witnessing.Cosigning``): per witness its
    last cosigned size, its consecutive failures and whether its last answer was an error; the
    largest size cosigned by the quorum."""

    def collect() -> Iterable[Metric]:
        cosigned = GaugeMetricFamily(
            "ledger_witness_cosigned_size", "last size the witness cosigned", labels=["witness"]
        )
        failures = GaugeMetricFamily(
            "ledger_witness_failures", "consecutive failures asking the witness", labels=["witness"]
        )
        erring = GaugeMetricFamily(
            "ledger_witness_error", "1 while the witness's last answer was an error",
            labels=["witness"],
        )  # fmt: skip
        for w in status():
            cosigned.add_metric([w.name], float(w.cosigned_size or 0))
            failures.add_metric([w.name], float(w.failures))
            erring.add_metric([w.name], 1.0 if w.failures else 0.0)
        quorum = GaugeMetricFamily(
            "ledger_witness_quorum_size", "largest checkpoint size cosigned by the quorum"
        )
        quorum.add_metric([], float(quorum_size()))
        return [cosigned, failures, erring, quorum]

    return collect


def evidence_metrics(evidence: Any, read_only: Callable[[], bool]) -> Any:
    """A collector of ``ledger.log.evidence.Evidence``: halted (1 when the log stopped signing
    on evidence), the alert (witnesses reporting a size beyond the tree, fewer than the quorum:
    the "degraded" signal) and whether the log is read-only for any reason."""

    def collect() -> Iterable[Metric]:
        halted = GaugeMetricFamily(
            "ledger_evidence_halted", "1 while the log is halted on evidence of a rollback or fork"
        )
        halted.add_metric([], 1.0 if evidence.halted is not None else 0.0)
        alert = GaugeMetricFamily(
            "ledger_evidence_alert", "witnesses reporting a size beyond the local tree"
        )
        alert.add_metric([], float(evidence.alerts))
        ro = GaugeMetricFamily("ledger_read_only", "1 while the log signs and appends nothing")
        ro.add_metric([], 1.0 if read_only() else 0.0)
        return [halted, alert, ro]

    return collect
