"""The client's network side: the gRPC client, C2SP tiles, fetching receipts, following a log.

Owns: where a server is (``connection``), the gRPC client (``log``: with ``ledger.api.wire`` the
only client module on the generated code and grpc), the tiles client over stdlib urllib
(``tiles``), fetching and upgrading receipts from a server or tiles (``receipt_fetch``,
``receipt_tiles``) and the monitor that follows a log (``monitor``). Only ``log`` loads grpc.

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.records``, ``ledger.fileio``,
``ledger.api.wire``, ``ledger.v1``, ``ledger_client.receipts``; libraries ``grpc``,
``urllib.request``.
"""
