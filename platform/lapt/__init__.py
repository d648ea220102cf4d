"""Continued pre-training at the edge: the Ray Train driver and its worker, DeepSpeed's config, progress."""
