"""Hierarchical fair share: who deserves what, per resource, top-down through the queue tree."""

from kaid.fairshare.compute import compute_fair_share, decay_usage
from kaid.fairshare.rows import QueueRow, queue_rows, record_usage

__all__ = ["QueueRow", "compute_fair_share", "decay_usage", "queue_rows", "record_usage"]
