"""What a measurement returns, shared by every layer above: a run's results, the checks' and the timing's
records and their statistics."""
