"""Findings: what cost a run without stopping it (slowdowns, training health) and the
configuration pitfalls its log shows."""
