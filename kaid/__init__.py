"""kai: a GPU scheduler for Kubernetes that speaks KAI-Scheduler's API.

Layers point one way: front ends (``kaid.kube``, ``kaid.sim``, ``kaictl``) -> ``kaid.cycle`` ->
``kaid.actions`` -> ``kaid.placement`` / ``kaid.fairshare`` -> ``kaid.model`` -> ``kaid.api``.
"""

__version__ = "0.1.0"
