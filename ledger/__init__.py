"""Decision Ledger: a transparency log for the decisions AI agents make.

The pure core (``merkle``, ``checkpoint``, ``timestamp``, ``records``) does no I/O and imports
neither grpc nor rocksdict; the service modules are built around it.
"""

__version__ = "0.1.0"
