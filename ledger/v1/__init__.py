"""Generated protobuf and gRPC code for ``proto/ledger/v1/ledger.proto`` (do not edit).

Owns: the messages and service stubs. Regenerate with ``make proto`` (``tools/gen_proto.py``);
a test fails when these files drift. Only ``ledger.api`` and ``ledger_client.remote`` import it.

May import: libraries ``google.protobuf``, ``grpc``.
"""
