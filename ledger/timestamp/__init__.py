"""timestamp."""
