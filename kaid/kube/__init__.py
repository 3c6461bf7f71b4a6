"""The only layer that talks to the Kubernetes API server: watch cache, binder, status writer, leader
election, metrics and the daemon loop."""
