"""Decision Ledger: a transparency log for the decisions AI agents make (RFC 6962/9162 Merkle
tree, C2SP checkpoints and tiles, RFC 3161 anchors), its server and the operator CLI ``ledger``.

Owns: nothing but its packages and ``python -m ledger`` (``__main__``); no module sits directly
in ``ledger/``. The packages by job, in the direction of imports (a package imports only
packages listed before it, besides the generated ``v1``, and only those its docstring names):

* the pure core, no I/O, shared with the offline verifier: ``core`` (Merkle math, notes,
  checkpoints, tiles, limits, types, errors), ``timestamp`` (RFC 3161 verification),
  ``records`` (decision records);
* ``fileio``: the one small stdlib-only I/O helper both the server and the client may use;
* the server: ``store`` (storage contract, RocksDB), ``witness`` (a tlog-witness), ``net``
  (the one outbound HTTP client), ``log`` (the log and its background work), ``tsa`` (RFC
  3161 clients and a development TSA), ``api`` (gRPC), ``http`` (tiles, metrics, mirror),
  ``ops`` (backup, restore, fsck), ``app`` (settings, composition), ``cli`` (``ledger``);
* ``v1``: the generated protobuf code, imported only by ``api`` and the client's ``remote``.

Each package's docstring says what it owns and, in "May import:", which of our packages and
which libraries it may import; ``tests/unit/test_layers.py`` holds the same rules and checks
every import. Standard-library modules are free, except those that reach the network, other
processes or a database (``urllib.request``, ``http.server``, ``ssl``, ``subprocess``,
``sqlite3``...): those are named like libraries.

May import: ``ledger.cli``.
"""

__version__ = "0.1.0"
