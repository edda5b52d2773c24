"""The application: operator settings, checks before start, and a running server composed.

Owns: the settings model (``settings``: defaults < TOML < environment < flags) and its sample
file (``settings_sample``), preflight checks (``preflight``), the TSA targets built from the
settings (``tsa_setup``) and the composition of store, log, service, gRPC and HTTP servers
(``compose``).

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.fileio``, ``ledger.store``,
``ledger.log``, ``ledger.witness``, ``ledger.tsa``, ``ledger.api``, ``ledger.http``,
``ledger.ops``, ``ledger.net``, ``ledger.objstore``; libraries ``pydantic``,
``pydantic_settings``, ``grpc``, ``aiohttp``, ``cryptography``, ``socket``.
"""
