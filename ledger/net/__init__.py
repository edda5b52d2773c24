"""net: the server side's outbound HTTP, one aiohttp client (``ledger.net.client``).

Owns: timeouts, response-size caps and the mapping of transport failures to the error tree for
every request the server makes (the TSA client, witnessing). Imported by ``ledger.tsa`` and
``ledger.log``; the offline verifier never loads it (its tile client stays on the standard
library: ``ledger_client.remote.tiles``).

May import: ``ledger.core``; libraries ``aiohttp``.
"""
