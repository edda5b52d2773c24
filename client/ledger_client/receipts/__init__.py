"""Receipts and runs, verified offline: the heart of ``ledger-verify``; no network, no grpc.

Owns: the receipt format (``receipt``), verifying a receipt part by part (``verify``), a whole
run (``run_verify``) and selective disclosure (``disclose``). Fetching receipts over the
network lives in ``ledger_client.remote``.

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.records``, ``ledger.fileio``;
libraries ``cryptography``.
"""
