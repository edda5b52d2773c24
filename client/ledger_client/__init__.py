"""ledger_client: the offline verifier (``ledger-verify``) and the thin agent client.

Installed under the import name ``ledger_client`` (the folder is ``client/``). The offline parts
import neither grpc nor rocksdict.
"""

__version__ = "0.1.0"
