"""net: the server side's HTTP plumbing: one aiohttp client (``ledger.net.client``) and one
accept loop with limits for every HTTP listener (``ledger.net.listener``).

Owns: timeouts, response-size caps and the mapping of transport failures to the error tree for
every request the server makes (the TSA client, witnessing); header and body timeouts,
connection caps (in all and per address) and the handling of accept failures for every HTTP
server (tiles, ``/metrics``, the witness, the TSA). Imported by ``ledger.tsa``, ``ledger.log``,
``ledger.witness`` and ``ledger.http``; the offline verifier never loads it (its tile client
stays on the standard library: ``ledger_client.remote.tiles``).

May import: ``ledger.core``; libraries ``aiohttp``, ``socket``, ``ssl``.
"""
