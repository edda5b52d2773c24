"""receipts."""
