"""The gRPC API of the log (``ledger.v1.LedgerService``).

Owns: the wire boundary, protobuf <-> core types (``wire``: it depends on the core types only, so
the client's ``ledger_client.remote`` may import it), the servicer (``server``), the
interceptor (``interceptor``: authentication, scopes, rate limits), the access log line
(``access``, also written by the HTTP append), tokens and mTLS identities (``auth``), TLS
material (``tls``), request streams (``streams``) and the byte budget (``budget``, shared
with the HTTP append).

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.log``, ``ledger.v1``,
``ledger.fileio``, ``ledger.net.listener`` (its folding error logger); libraries ``grpc``,
``grpc_health``, ``grpc_reflection``, ``google.protobuf``, ``cryptography``, ``ssl``.
"""
