"""witness."""
