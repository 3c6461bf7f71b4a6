"""The Helm chart is the one source of the cluster manifests: this module renders the kustomize manifests
from it, and fills the ``config`` part of its values schema from kaid's config model.

    python -m tests.chart      # rewrite manifests/*.yaml, manifests/*/ and values.schema.json's config part

``tests/test_chart.py`` fails when any of them is stale. helm itself is built from its Go module by
``.ci/helm/build.sh`` (cached; ``KAI_HELM`` names another binary).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kaid.api.config import SchedulerConfig

from .build_script import is_built, run_build

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = REPO_ROOT / "manifests"
CHART = MANIFESTS / "helm" / "kai"
SCHEMA = CHART / "values.schema.json"
CRDS = CHART / "crds"
HELM_BUILD = REPO_ROOT / ".ci" / "helm" / "build.sh"
RELEASE = "kai"
NAMESPACE = "kai-scheduler"
HEADER = "# Generated from the Helm chart manifests/helm/kai by `python -m tests.chart`; edit the chart instead.\n"

_SOURCE = re.compile(r"^---\n# Source: [^/\n]+/(\S+)\n", re.MULTILINE)


class HelmError(RuntimeError):
    """helm could not be built, or a helm command failed."""


# --------------------------------------------------------------------------------------------------
# helm


def helm_cached() -> bool:
    """Whether ``build.sh`` would return without building (or ``KAI_HELM`` is set)."""
    return bool(os.environ.get("KAI_HELM")) or is_built(HELM_BUILD, "--print-binary")


def ensure_helm(*, output: IO[str] | None = None, timeout: float = 3600.0) -> Path:
    """The helm binary, built first when it is not cached (progress to ``output``, default stderr)."""
    override = os.environ.get("KAI_HELM")
    return Path(override) if override else run_build(HELM_BUILD, output=output, timeout=timeout, error=HelmError)


@dataclass(frozen=True)
class Helm:
    """Runs one helm binary with its own empty config, cache and data directories."""

    binary: Path
    home: Path

    def run(self, *args: str, check: bool = True, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        cmd = [str(self.binary), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise HelmError(f"{' '.join(cmd)} failed with status {proc.returncode}:\n{proc.stderr.strip()}")
        return proc

    def template(
        self, values: Mapping[str, Any] | None = None, *, show_only: Sequence[str] = (), namespace: str = NAMESPACE
    ) -> str:
        """``helm template`` of the chart with ``values`` (given as a values file, so types are kept)."""
        args = ["template", RELEASE, str(CHART), "--namespace", namespace]
        if values:
            path = self.home / "values.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
            args += ["--values", str(path)]
        for template in show_only:
            args += ["--show-only", template]
        return self.run(*args).stdout


def split_by_template(rendered: str) -> dict[str, str]:
    """``helm template`` output -> template path (``templates/x.yaml``) -> its documents, in order."""
    parts = _SOURCE.split(rendered)
    # parts: [preamble, path1, body1, path2, body2, ...]
    by_template: dict[str, list[str]] = {}
    for path, body in zip(parts[1::2], parts[2::2], strict=True):
        by_template.setdefault(path, []).append(body.rstrip("\n") + "\n")
    return {path: "---\n".join(bodies) for path, bodies in by_template.items()}


# --------------------------------------------------------------------------------------------------
# The kustomize manifests, rendered from the chart


@dataclass(frozen=True)
class Rendering:
    """One kustomization rendered from the chart: its folder, the values, and which templates it takes."""

    folder: Path
    values: Mapping[str, Any]
    show_only: tuple[str, ...] = ()
    head: tuple[str, ...] = ()  # files listed before the rendered ones (kept by hand)
    comment: str = ""


RENDERINGS = (
    Rendering(
        MANIFESTS,  # everything, GPU sharing included; the default queues come apart, once the CRDs exist
        {"global": {"gpuSharing": True}, "defaultQueue": {"createDefaultQueue": False}},
        head=("namespace.yaml", *(f"helm/kai/crds/{crd.name}" for crd in sorted(CRDS.glob("*.yaml")))),
        comment="# kai with kubectl: kubectl apply -k manifests/ (the Helm chart in manifests/helm/kai is the same\n"
        "# install with values; see the README's cluster section).\n",
    ),
    Rendering(
        MANIFESTS / "default-queues",
        {},
        show_only=("templates/default-queues.yaml",),
        comment="# The default queue tree, applied after the CRDs exist: kubectl apply -k manifests/default-queues\n",
    ),
    Rendering(
        MANIFESTS / "monitoring",
        {"metrics": {"serviceMonitor": {"enabled": True}}},
        show_only=("templates/servicemonitor.yaml",),
        comment="# Needs the Prometheus Operator's CRDs: kubectl apply -k manifests/monitoring\n",
    ),
)


def _output_name(template: str) -> str:
    name = Path(template).name
    return "queues.yaml" if name == "default-queues.yaml" else name


def kustomize_files(helm: Helm) -> dict[Path, str]:
    """Every generated file of the kustomize manifests -> its content."""
    files: dict[Path, str] = {}
    for rendering in RENDERINGS:
        docs = split_by_template(helm.template(rendering.values, show_only=rendering.show_only))
        names = []
        for template, body in docs.items():
            name = _output_name(template)
            names.append(name)
            files[rendering.folder / name] = HEADER + body
        resources = "".join(f"  - {name}\n" for name in (*rendering.head, *names))
        files[rendering.folder / "kustomization.yaml"] = (
            HEADER + rendering.comment + "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            "resources:\n" + resources
        )
    return files


def stale_generated_files(expected: Mapping[Path, str]) -> list[Path]:
    """Files under manifests/ that carry the generated header but that the chart no longer renders."""
    found = [p for p in MANIFESTS.rglob("*.yaml") if p.read_text().startswith(HEADER)]
    return sorted(p for p in found if p not in expected)


# --------------------------------------------------------------------------------------------------
# The values schema's config part, from kaid's config model


def config_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the ``config`` property, the ``$defs`` it refers to) of values.schema.json."""
    model = _untitled(SchedulerConfig.model_json_schema(ref_template="#/$defs/{model}"))
    defs: dict[str, Any] = model.pop("$defs", {})
    model["description"] = (
        "kaid's own settings (its config file, kaid/api/config.py); keys set here win over the values above."
    )
    return model, defs


def _untitled(schema: Any) -> Any:
    """The schema without pydantic's generated ``title`` of every field (noise for a reader)."""
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema


def values_schema() -> str:
    """values.schema.json with its config part regenerated."""
    schema = json.loads(SCHEMA.read_text())
    schema["properties"]["config"], schema["$defs"] = config_schema()
    return json.dumps(schema, indent=2) + "\n"


def main() -> int:
    SCHEMA.write_text(values_schema())
    print(f"wrote {SCHEMA.relative_to(REPO_ROOT)}")
    with tempfile.TemporaryDirectory(prefix="kai-chart-") as home:
        files = kustomize_files(Helm(ensure_helm(), Path(home)))
    for path in stale_generated_files(files):
        path.unlink()
        print(f"removed {path.relative_to(REPO_ROOT)}")
    for path, text in files.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
