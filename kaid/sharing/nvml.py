"""NVML through ``pynvml`` (the ``nvidia-ml-py`` package): the GPUs a process sees, their UUIDs and memory, and
the processes using them. Every NVML failure becomes an ``NvmlError`` with one line that says what to check.

The module is passed in (``Nvml(module)``), so that tests run against a fake one; ``Nvml()`` imports pynvml.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any


class NvmlError(RuntimeError):
    """NVML is missing or failed; the message is one line that says what to check."""


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_bytes: int | None  # None: NVML cannot tell (e.g. without the rights to see other processes)


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    memory_total: int  # bytes
    processes: tuple[GpuProcess, ...]


# NVML's return codes worth a sentence of their own (pynvml's NVML_ERROR_* values)
_HINTS = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": "libnvidia-ml.so is not in the container: run it with the nvidia runtime "
                                    "(runtimeClassName) or CDI, which mounts the driver's libraries",
    "NVML_ERROR_DRIVER_NOT_LOADED": "the NVIDIA driver is not loaded on this node",
    "NVML_ERROR_NO_PERMISSION": "no permission to use the GPU device files",
    "NVML_ERROR_INSUFFICIENT_SIZE": "NVML's buffer was too small",
}


class Nvml:
    """An initialised NVML session (``with Nvml() as nvml:``; ``close`` shuts it down)."""

    def __init__(self, module: ModuleType | Any | None = None) -> None:
        if module is None:
            try:
                module = importlib.import_module("pynvml")
            except ImportError as err:
                raise NvmlError(f"the pynvml module is missing ({err}): install nvidia-ml-py") from None
        self.nv = module
        self._call("nvmlInit")
        self.open = True

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.open:
            self.open = False
            with contextlib.suppress(Exception):  # shutting down: nothing to do about a failure
                self.nv.nvmlShutdown()

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.nv, name)(*args)
        except Exception as err:
            raise NvmlError(f"NVML {name} failed: {self._explain(err)}") from None

    def _explain(self, err: Exception) -> str:
        code = getattr(err, "value", None)
        for hint_name, hint in _HINTS.items():
            if code is not None and code == getattr(self.nv, hint_name, object()):
                return f"{err} ({hint})"
        return str(err) or type(err).__name__

    def count(self) -> int:
        return int(self._call("nvmlDeviceGetCount"))

    def uuid(self, index: int) -> str:
        return _text(self._call("nvmlDeviceGetUUID", self._call("nvmlDeviceGetHandleByIndex", index)))

    def gpus(self) -> list[Gpu]:
        """Every GPU this process sees, with its memory and the processes that use it."""
        out = []
        for index in range(self.count()):
            handle = self._call("nvmlDeviceGetHandleByIndex", index)
            memory = self._call("nvmlDeviceGetMemoryInfo", handle)
            procs: dict[int, GpuProcess] = {}
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                for p in self._call(getter, handle) or []:
                    used = getattr(p, "usedGpuMemory", None)
                    pid = int(p.pid)
                    known = procs.get(pid)
                    total = (known.used_bytes or 0) + (used or 0) if known is not None else used
                    procs[pid] = GpuProcess(pid, None if used is None and known is None else total)
            out.append(Gpu(index, _text(self._call("nvmlDeviceGetUUID", handle)), int(memory.total),
                           tuple(procs.values())))
        return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
