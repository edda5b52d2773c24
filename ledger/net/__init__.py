"""net: the server side's HTTP plumbing: one aiohttp client (``ledger.net.client``), one
kept-open blocking connection per thread for the object store's PUTs
(``ledger.net.keepalive``) and one accept loop with limits for every HTTP listener
(``ledger.net.listener``).

Owns: timeouts, response-size caps and the mapping of transport failures to the error tree for
every request the server makes (the TSA client, witnessing, the bucket's PUTs); header and
body timeouts, connection caps (in all and per address) and the handling of accept failures
for every HTTP server (tiles, ``/metrics``, the witness, the TSA). Imported by ``ledger.tsa``,
``ledger.log``, ``ledger.witness``, ``ledger.http`` and ``ledger.objstore``; the offline
verifier never loads it (its tile client stays on the standard library:
``ledger_client.remote.tiles``).

May import: ``ledger.core``; libraries ``aiohttp``, ``http.client``, ``socket``, ``ssl``.
"""
