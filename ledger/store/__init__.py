"""Storage of the log: the contract every store keeps, and its implementations.

Owns: the storage contract and an in-memory store with a fault hook (``contract``), RocksDB
(``rocks``: the only server module importing ``rocksdict`` besides the layout migration),
converting a data dir to the tile layout (``migrate``), the dedup table derived from the entry
bundles (``dedup``: a memory-mapped file) and reading C2SP tiles from a store (``tile_reader``).

May import: ``ledger.core``, ``ledger.fileio``; libraries ``rocksdict``.
"""
