"""Re-run the user guide's session against the test control plane and print it.

    .venv/bin/python docs/session.py        (from the repository root; builds the control plane if missing)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.controlplane import ControlPlane, ensure_binaries, wait_until  # noqa: E402

TRAIN = """apiVersion: batch/v1
kind: Job
metadata:
  name: llm-finetune
  namespace: ml
  labels: {kai.scheduler/queue: team-a}
  annotations: {kai.scheduler/batch-min-member: "4"}
spec:
  parallelism: 4
  completions: 4
  template:
    metadata:
      labels: {kai.scheduler/queue: team-a, priorityClassName: train}
    spec:
      schedulerName: kai-scheduler
      restartPolicy: Never
      containers:
      - name: trainer
        image: trainer:latest
        resources:
          limits: {nvidia.com/gpu: "2"}
          requests: {cpu: "4", memory: 32Gi}
"""


def main() -> int:
    bindir = Path(sys.executable).parent
    cp = ControlPlane(bindir=ensure_binaries()).start()
    env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig), "PATH": f"{bindir}:{os.environ['PATH']}",
           "COLUMNS": "110"}
    work = cp.dir

    def sh(cmd: str) -> None:
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env, cwd=work, check=False)
        print(f"$ {cmd}\n{out.stdout}{out.stderr}")

    try:
        subprocess.run(["kubectl", "apply", "-k", str(ROOT / "manifests")], env=env, check=True, capture_output=True)
        wait_until(lambda: "queues" in cp.kubectl("api-resources", check=False).stdout, 30, "kai CRDs")
        subprocess.run(["kubectl", "apply", "-k", str(ROOT / "manifests" / "default-queues")], env=env, check=True,
                       capture_output=True)
        cp.add_gpu_nodes(2, gpus=8, wait=True)
        token = cp.serviceaccount_kubeconfig("kai-scheduler", "kai-scheduler")
        with open(work / "kaid.log", "w") as log:
            kaid = subprocess.Popen([str(bindir / "kaid"), "run", "--kubeconfig", str(token), "--metrics-port", "0",
                                     "--no-leader-elect"], stderr=log, env=env)
        for cmd in ("kubectl kai queue create research --gpu-quota 8 --gpu-limit 8",
                    "kubectl kai queue create training --gpu-quota 8 --gpu-limit -1",
                    "kubectl kai queue create team-a --parent training --gpu-quota 4 --gpu-limit 6",
                    "kubectl kai queue create team-b --parent training --gpu-quota 4",
                    "kubectl kai queue list"):
            sh(cmd)
        cp.ensure_namespace("ml")
        cp.wait_for_default_serviceaccount("ml")
        (work / "train.yaml").write_text(TRAIN)
        sh("kubectl kai dry-run -f train.yaml")
        sh("kubectl apply -f train.yaml")
        time.sleep(4)
        for cmd in ("kubectl get pods -n ml -o wide", "kubectl get pg -n ml",
                    "kubectl kai explain job llm-finetune -n ml", "kubectl kai queue set team-a --gpu-limit 8"):
            sh(cmd)
        time.sleep(4)
        for cmd in ("kubectl get pods -n ml", "kubectl get queues", "kubectl kai fairshare", "kubectl kai top"):
            sh(cmd)
        kaid.terminate()
        kaid.wait(10)
    finally:
        cp.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
