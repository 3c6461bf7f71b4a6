"""Hierarchical fair share: who deserves what, per resource, top-down through the queue tree."""

from kaid.fairshare.compute import compute_fair_share
from kaid.fairshare.rows import QueueRow, queue_rows
from kaid.fairshare.usage import UsageHistory, UsageParams

__all__ = ["QueueRow", "UsageHistory", "UsageParams", "compute_fair_share", "queue_rows"]
