"""Lines: bytes decoded to text, routing prefixes (host, rank, local rank) and timestamps read,
hard-wrapped lines rejoined, SLURM host lists expanded."""
