"""The log over HTTP: C2SP tlog-tiles, Prometheus metrics and the static tile mirror.

Owns: the tiles endpoint (``tiles``), ``/metrics`` (``metrics``), the static mirror
(``mirror``) and the process that runs it beside the server (``mirror_process``, spawned as
``python -m ledger.http.mirror_process``).

May import: ``ledger.core``, ``ledger.store``, ``ledger.log``, ``ledger.fileio``, ``ledger.net``;
libraries
``aiohttp``, ``ssl``, ``subprocess``.
"""
