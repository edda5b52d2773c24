"""The log: sequencing, integration, publishing and everything the running log does around them.

Owns: the facade over one store (``facade``), sequencing and integration (``sequencer``,
``integrator``), signing checkpoints (``publisher``), the asyncio service with group commit and
pushback (``service``), the receive-time clock (``clock``), the published high-water mark and
recovery (``highwater``, ``recovery``), self-checks (``selfcheck``), RFC 3161 anchoring
(``anchoring``), asking witnesses to cosign (``witnessing``), read-only reader processes
(``reader``) and the Prometheus metrics (``metrics``).

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.store``, ``ledger.witness``,
``ledger.net``, ``ledger.fileio``; libraries ``aiohttp``, ``prometheus_client``.
"""
