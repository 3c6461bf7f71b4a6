"""End-to-end tests against a real control plane on loopback (see controlplane.py)."""
