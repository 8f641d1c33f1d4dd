"""Engine: the incremental state every driver feeds, and `analyze` for logs that have ended."""
