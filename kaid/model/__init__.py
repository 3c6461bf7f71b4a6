"""The engine's in-memory model of the cluster: plain classes with ``__slots__`` and integer units."""
