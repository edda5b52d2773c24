"""``ledger-verify export``: a verified run as OTLP/JSON, read back with the official
opentelemetry-proto messages (hex ids converted to the protobuf JSON mapping's base64 as the
OTLP spec requires: 16-byte trace ids, 8-byte span ids, parents equal to record parents, times),
and as W3C PROV-JSON read with the ``prov`` package (one entity per record, one derivation per
parent, inferred links marked, the agent a prov:Agent, the verdict an attribute)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prov.model import ProvAgent, ProvAssociation, ProvDerivation, ProvDocument, ProvEntity

from ledger.core.timefmt import parse_rfc3339
from ledger.records.decision import record_digest
from ledger_client.cli.main import main
from tests.decision_world import DECIDE, FAN, TRACE, Runs, build, write


@pytest.fixture(scope="module")
def world() -> Runs:
    return build()


def _export(world: Runs, run: Path, form: str, out: Path) -> Any:
    result = CliRunner().invoke(
        main, ["export", str(run), "--key", world.world.key.key_string(), "--format", form,
               "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def _hex_to_base64(node: Any) -> Any:
    """The OTLP/JSON hex ids as the protobuf JSON mapping's base64 (OTLP spec, JSON encoding)."""
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
            else _hex_to_base64(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_to_base64(v) for v in node]
    return node


def test_otlp_parses_as_export_trace_service_request(world: Runs, tmp_path: Path) -> None:
    files = write(tmp_path / "runs", world)
    body = _export(world, files["decide"], "otlp", tmp_path / "decide.otlp.json")
    request = json_format.Parse(json.dumps(_hex_to_base64(body)), ExportTraceServiceRequest())
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    records = world.runs[DECIDE]
    assert len(spans) == len(records)
    by_id = {s.span_id: s for s in spans}
    for record in records:
        digest = record_digest(record)
        span = by_id[digest[:8]]
        assert len(span.trace_id) == 16 and span.trace_id.hex() == TRACE
        assert len(span.span_id) == 8
        parents = [bytes.fromhex(p)[:8] for p in record.parent_digests]
        assert span.parent_span_id == (parents[0] if parents else b"")
        assert parents[0:1] == [] or span.parent_span_id in by_id
        start = round(parse_rfc3339(record.started_at or record.time).timestamp() * 1000)
        end = round(parse_rfc3339(record.ended_at).timestamp() * 1000) if record.ended_at else start
        assert span.start_time_unix_nano == start * 1_000_000
        assert span.end_time_unix_nano == end * 1_000_000
        attributes = {a.key: a.value for a in span.attributes}
        assert attributes["ledger.record_digest"].string_value == digest.hex()
        assert attributes["ledger.verdict"].string_value in ("ok", "warning")
    first = by_id[record_digest(records[0])[:8]]
    assert {a.key: a.value.string_value for a in first.attributes}["gen_ai.request.model"] == (
        "gpt-test-1"
    )
    assert request.resource_spans[0].resource.attributes[0].value.string_value == "decider"


def test_otlp_cross_run_parent_is_a_link(world: Runs, tmp_path: Path) -> None:
    files = write(tmp_path / "runs", world)
    body = _export(world, files["fan"], "otlp", tmp_path / "fan.otlp.json")
    request = json_format.Parse(json.dumps(_hex_to_base64(body)), ExportTraceServiceRequest())
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    root = next(s for s in spans if s.span_id == record_digest(world.runs[FAN][0])[:8])
    assert root.parent_span_id == b"" and len(root.links) == 1
    link = {a.key: a.value for a in root.links[0].attributes}
    assert link["ledger.parent.external"].bool_value
    fan_in = next(s for s in spans if s.span_id == record_digest(world.runs[FAN][7])[:8])
    assert len(fan_in.links) == 5  # six parents: the first is the parent span, five links


def test_prov_loads_with_one_entity_per_record_and_one_derivation_per_parent(
    world: Runs, tmp_path: Path
) -> None:
    files = write(tmp_path / "runs", world)
    for run, path in ((DECIDE, files["decide"]), (FAN, files["fan"])):
        out = tmp_path / f"{path.stem}.prov.json"
        _export(world, path, "prov", out)
        doc = ProvDocument.deserialize(source=str(out), format="json")
        records = world.runs[run]
        entities = [
            e for e in doc.get_records(ProvEntity)
            if "DecisionRecord" in str(e.get_attribute("prov:type"))
        ]  # fmt: skip
        assert {e.identifier.localpart for e in entities if e.identifier} == {
            record_digest(r).hex() for r in records
        }
        derivations = list(doc.get_records(ProvDerivation))
        assert len(derivations) == sum(len(r.parent_digests) for r in records)
        agents = list(doc.get_records(ProvAgent))
        assert len(agents) == 1 and len(list(doc.get_records(ProvAssociation))) == len(records)
        verdicts = {str(next(iter(e.get_attribute("ledger:verdict")))) for e in entities}
        assert verdicts <= {"ok", "warning"}
        inferred = [next(iter(d.get_attribute("ledger:inferred"))) for d in derivations]
        assert len(inferred) == len(derivations)
        assert sum(map(bool, inferred)) == (1 if run == DECIDE else 0)  # one inferred link
