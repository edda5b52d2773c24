"""The gRPC API of the log (``ledger.v1.LedgerService``).

Owns: the wire boundary, protobuf <-> core types (``wire``: it depends on the core types only, so
the client's ``ledger_client.remote`` may import it), the servicer (``server``), the
interceptor (``interceptor``: authentication, scopes, rate limits, access log), tokens and
mTLS identities (``auth``), TLS material (``tls``), request streams (``streams``) and the byte
budget (``budget``).

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.log``, ``ledger.v1``,
``ledger.fileio``; libraries ``grpc``, ``grpc_health``, ``grpc_reflection``,
``google.protobuf``, ``cryptography``, ``ssl``.
"""
