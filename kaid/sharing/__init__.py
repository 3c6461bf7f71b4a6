"""GPU sharing on a real node: the device handoff of shared-GPU pods (``handoff``), NVML (``nvml``), the
process of a reservation pod (``reservation_agent``) and the per-node GPU memory agent (``node_agent``)."""
