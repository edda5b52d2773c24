"""fileio."""
