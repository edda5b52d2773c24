"""Plumbing shared by the two CLIs (``ledger`` and ``ledger-verify``), so neither imports the
other's command modules: the connection options (``--server``, TLS files, token; each from its
flag or ``LEDGER_*`` variable), the one top-level error handler (``CliGroup``) with its exit
codes, the Ctrl-C guard of the entry points, outcomes and ``--json``, hash and key options.

Not API: it exists for the CLIs. It may import click, ``ledger.core`` and
``ledger_client.remote.connection`` (no grpc), so the offline verifier stays free of grpc,
rocksdict and aiohttp.
"""
