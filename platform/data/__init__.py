"""Data at the edge: corpus checks (great-expectations, language id) and artifact storage (S3)."""
