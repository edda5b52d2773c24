"""The plumbing both CLIs share (``ledger`` and ``ledger-verify``), so that neither imports the
other's command modules.

Owns: the connection options (``--server``, the TLS files, the token: each from its flag or its
``LEDGER_*`` variable; ``connection``), the one top-level error handler (``CliGroup``, ``fail``)
with the exit codes (``errors``), the Ctrl-C guard of the entry points (``interrupt``, standard
library only), the lazy command group (``lazy``: a subcommand's module imported when it runs,
``--help`` from a table), outcomes and ``--json`` (``outcome``), hash and key options (``encoding``,
``keys``). Not API: it exists for the two CLIs.

May import: ``ledger.core``, ``ledger_client.remote.connection``; libraries ``click``.
"""
