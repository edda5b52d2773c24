"""The log over HTTP: C2SP tlog-tiles, Prometheus metrics and the static tile mirror.

Owns: the tiles endpoint (``tiles``), ``/metrics`` (``metrics``), the JSON append for agents in
other languages (``append``: ``POST /append``), the static mirror (``mirror``) and the process
that runs it beside the server (``mirror_process``, spawned as
``python -m ledger.http.mirror_process``).

May import: ``ledger.core``, ``ledger.records``, ``ledger.store``, ``ledger.log``,
``ledger.fileio``, ``ledger.net``, ``ledger.api.auth``, ``ledger.api.budget`` and
``ledger.api.access`` (the gRPC append's access policy, byte budget and access log); libraries
``aiohttp``, ``jsonschema`` (the append checks records against the published JSON Schema),
``ssl``, ``subprocess``.
"""
