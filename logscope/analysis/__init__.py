"""Analysis: attempts and their clocks, incidents (root cause, cascade, culprit), how each attempt
and the job ended, the lost-compute ledger and the lines read again for context."""
