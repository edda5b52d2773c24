"""Auditing many runs offline: per-record checks shared across runs, lineage, timelines, reports
and an index.

Owns: ``verify`` (per-record verification with shared checks), the verdict model every view
renders (``verdicts``), what a record decided (``decision``), ``lineage``, ``timeline``,
``report_html`` with its graph layout (``graph_layout``), exports (``export``: OTLP/JSON,
PROV-JSON), the agent chain scan (``chain``: gaps, forks, restarts), checking many run files in
worker processes (``parallel``), the SQLite index (``index``), finding run files
(``run_files``) and reading them for the index (``load``).

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.records``, ``ledger.fileio``,
``ledger_client.receipts``; libraries ``cryptography``, ``grandalf`` (the report's graph
layout), ``sqlite3``, ``multiprocessing`` (the fork start method for the report's page
renderers).
"""
