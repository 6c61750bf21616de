"""Worker processes that check GEMMs on one device (fresh-process scenarios, per-device sweeps)."""
