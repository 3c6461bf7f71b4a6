"""kai's benchmarks: run each as ``python -m benchmarks.<name>`` from the repository root."""
