"""A c2sp.org/tlog-witness: the witness's decision, its durable state and its HTTP server.

Owns: the pure ``add-checkpoint`` decision (``core``), the journal and state of cosigned
checkpoints (``journal``, ``state``) and the aiohttp server (``server``).

May import: ``ledger.core``, ``ledger.fileio``, ``ledger.net``; libraries ``aiohttp``.
"""
