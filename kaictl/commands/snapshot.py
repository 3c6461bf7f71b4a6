"""``kaictl snapshot save``: everything the engine reads, in one file, stripped of what it does not."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from kaictl.commands.engine_input import Context, Kubeconfig, read_live
from kaictl.output import err_console, fail
from kaid.kube.strip import snapshot_list

app = typer.Typer(help="Save the cluster's scheduling state to a file (input of --snapshot and simulate).",
                  no_args_is_help=True)


@app.command("save")
def save(
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write: .json (fastest to read "
                                                "back, best for large clusters) or .yaml; default: stdout as "
                                                "YAML.")] = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Read nodes, pods, queues, PodGroups, priority classes, topologies, namespaces, PDBs, persistent volumes,
    their claims and storage classes from the cluster into one snapshot file; pod specs are stripped to what
    scheduling needs, secrets never read."""
    doc = snapshot_list(read_live(kubeconfig, context))
    text = json.dumps(doc, indent=1) + "\n" if output is not None and output.suffix == ".json" else \
        yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as err:
        fail(f"cannot write {output}: {err.strerror}")
    kinds: dict[str, int] = {}
    for item in doc["items"]:
        kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    err_console().print(f"saved {len(doc['items'])} objects to {output}: "
                        + ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items())))
