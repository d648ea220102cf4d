"""Sweeps with Ray Tune: the trial driver and the cache of finished trials."""
