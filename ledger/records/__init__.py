"""Decision records: schema v1, validation, digests, commitments and run checks; pure, no I/O.

Owns: the record dataclasses, validator, digests and record ids (``decision``, its public names
re-exported here), salted commitments and selective disclosure (``commitments``), run-level
checks and ``run_closed`` (``runs``), and the JSON schemas (``schemas/``, package data).

May import: ``ledger.core``.
"""

from ledger.records.decision import (
    CANDIDATE_FIELDS,
    KINDS,
    OTEL_FIELDS,
    PAYLOAD_FIELDS,
    PAYLOAD_TYPES,
    RECORD_FIELDS,
    RUN_STEP_FIELDS,
    SCHEMA_V1,
    Candidate,
    ConstraintCheck,
    DecisionRecord,
    Handoff,
    MemoryWrite,
    OtelContext,
    Outcome,
    ParameterConstruction,
    Payload,
    Plan,
    RunClosed,
    RunStep,
    Termination,
    ToolCall,
    ToolSelection,
    new_record_id,
    record_digest,
    uuid7_time_ms,
    verify_disclosure,
)

__all__ = [
    "CANDIDATE_FIELDS",
    "KINDS",
    "OTEL_FIELDS",
    "PAYLOAD_FIELDS",
    "PAYLOAD_TYPES",
    "RECORD_FIELDS",
    "RUN_STEP_FIELDS",
    "SCHEMA_V1",
    "Candidate",
    "ConstraintCheck",
    "DecisionRecord",
    "Handoff",
    "MemoryWrite",
    "OtelContext",
    "Outcome",
    "ParameterConstruction",
    "Payload",
    "Plan",
    "RunClosed",
    "RunStep",
    "Termination",
    "ToolCall",
    "ToolSelection",
    "new_record_id",
    "record_digest",
    "uuid7_time_ms",
    "verify_disclosure",
]
