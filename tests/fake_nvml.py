"""A stand-in for the ``pynvml`` module (``nvidia-ml-py``): the functions kai calls, over made-up GPUs, with
pynvml's error class and codes. ``FakeNvml([])`` sees no GPU; ``FakeNvml(None, fail=NVML_ERROR_LIBRARY_NOT_FOUND)``
fails at init as pynvml does on a machine without the driver's library. Also a fake ``/proc`` for cgroups."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_INSUFFICIENT_SIZE = 7
GIB = 1 << 30


class NVMLError(Exception):
    _TEXT: ClassVar[dict[int, str]] = {NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
             NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded", NVML_ERROR_NO_PERMISSION: "Insufficient Permissions"}

    def __init__(self, value: int) -> None:
        super().__init__(self._TEXT.get(value, f"NVML error {value}"))
        self.value = value


@dataclass
class FakeGpu:
    uuid: str
    total: int = 80 * GIB
    processes: dict[int, int | None] = field(default_factory=dict)  # pid -> bytes used (None: not available)
    graphics: dict[int, int | None] = field(default_factory=dict)


class FakeNvml:
    """Module-like: ``Nvml(FakeNvml(...))``. ``calls`` counts the calls made, by function name."""

    NVMLError = NVMLError
    NVML_ERROR_LIBRARY_NOT_FOUND = NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_DRIVER_NOT_LOADED = NVML_ERROR_DRIVER_NOT_LOADED
    NVML_ERROR_NO_PERMISSION = NVML_ERROR_NO_PERMISSION
    NVML_ERROR_INSUFFICIENT_SIZE = NVML_ERROR_INSUFFICIENT_SIZE

    def __init__(self, gpus: list[FakeGpu] | None, fail: int | None = None) -> None:
        self.gpus = gpus or []
        self.fail = fail
        self.calls: dict[str, int] = {}
        self.initialised = False

    def _call(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name != "nvmlInit" and not self.initialised:
            raise NVMLError(1)  # NVML_ERROR_UNINITIALIZED

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        if self.fail is not None:
            raise NVMLError(self.fail)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        self._call("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise NVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT
        return self.gpus[index]

    def nvmlDeviceGetUUID(self, handle: FakeGpu) -> str:
        self._call("nvmlDeviceGetUUID")
        return handle.uuid

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu) -> SimpleNamespace:
        self._call("nvmlDeviceGetMemoryInfo")
        used = sum(u or 0 for u in [*handle.processes.values(), *handle.graphics.values()])
        return SimpleNamespace(total=handle.total, used=used, free=handle.total - used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeGpu) -> list[SimpleNamespace]:
        self._call("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in handle.processes.items()]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeGpu) -> list[SimpleNamespace]:
        self._call("nvmlDeviceGetGraphicsRunningProcesses")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in handle.graphics.items()]


def systemd_cgroup(pod_uid: str) -> str:
    """``/proc/<pid>/cgroup`` of a container process under the systemd cgroup driver (cgroup v2)."""
    slug = pod_uid.replace("-", "_")
    return f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{slug}.slice/cri-containerd-0a1b.scope\n"


def cgroupfs_cgroup(pod_uid: str) -> str:
    """The same under the cgroupfs driver (cgroup v1 lines)."""
    return "".join(f"{i}:{ctl}:/kubepods/besteffort/pod{pod_uid}/4c5d6e\n"
                   for i, ctl in enumerate(("memory", "cpu,cpuacct", "pids"), start=2))


def fake_proc(root: Path, cgroups: dict[int, str]) -> Path:
    """A ``/proc`` with a ``<pid>/cgroup`` file per entry."""
    for pid, text in cgroups.items():
        (root / str(pid)).mkdir(parents=True, exist_ok=True)
        (root / str(pid) / "cgroup").write_text(text)
    return root
