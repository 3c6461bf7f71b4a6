"""Hierarchical fair share: who deserves what, per resource, top-down through the queue tree."""

from kaid.fairshare.compute import compute_fair_share, decay_usage, queue_rows

__all__ = ["compute_fair_share", "decay_usage", "queue_rows"]
