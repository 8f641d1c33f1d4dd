"""Deterministic generators of realistic training-run logs, each returning the truth it computed."""
