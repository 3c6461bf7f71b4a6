"""A running pod's devices annotation is read once per text: pods that write the same devices share one tuple (the
cold build allocates no tracked object per pod for them), and what is read is what the text says."""

from __future__ import annotations

from kaid.api import constants as c
from kaid.model import pods
from kaid.model.pods import read_pod


def _running(name: str, devices: str) -> dict[str, object]:
    return {"kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "annotations": {c.GPU_DEVICES_ANNOTATION: devices}},
            "spec": {"nodeName": "n1", "schedulerName": "kai-scheduler",
                     "containers": [{"resources": {"requests": {c.GPU_RESOURCE: "2"}}}]},
            "status": {"phase": "Running"}}


def test_pods_writing_the_same_devices_share_one_tuple() -> None:
    a = read_pod(_running("a", "0,3"), [])
    b = read_pod(_running("b", "".join(["0", ",", "3"])), [])  # an equal text, another object
    assert a.devices == (0, 3)
    assert a.devices is b.devices


def test_devices_as_written() -> None:
    assert read_pod(_running("a", "1,,2"), []).devices == (1, 2)
    assert read_pod(_running("b", "x"), []).devices == ()
    assert read_pod(_running("c", "7"), []).devices == (7,)


def test_the_memory_is_bounded() -> None:
    pods._DEVICE_SETS.clear()
    for i in range(pods._DEVICE_SETS_KEPT + 10):
        assert read_pod(_running(f"p{i}", f"{i},{i + 1}"), []).devices == (i, i + 1)
    assert len(pods._DEVICE_SETS) <= pods._DEVICE_SETS_KEPT
