"""Generated protobuf and gRPC code for ``proto/ledger/v1/ledger.proto`` (do not edit).

Regenerate with ``make proto`` (``tools/gen_proto.py``); a test fails when these files drift.
Only ``ledger.server`` and the client's remote module import it.
"""
