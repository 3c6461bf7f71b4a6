"""One-shot reads of everything the engine needs, for kaictl (snapshot save, live fairshare, explain,
dry-run, top): the same resources the daemon watches, listed once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kaid.kube.cache import API_RESOURCES, ApiResource, served_group_versions
from kaid.kube.client import ApiError, KubeClient

Obj = dict[str, Any]


class ReadError(RuntimeError):
    """The cluster could not be read; the message says what to check."""


def read_cluster(client: KubeClient, resources: tuple[ApiResource, ...] = API_RESOURCES,
                 progress: Callable[[str], None] | None = None) -> list[Obj]:
    out: list[Obj] = []
    served: set[str] | None = None
    if any(res.optional for res in resources):
        try:
            served = served_group_versions(client)  # one request instead of one per optional CRD
        except Exception:
            served = None  # list them all and skip those that answer 404
    for res in resources:
        if res.optional and served is not None and res.group_version not in served:
            continue
        if progress is not None:
            progress(res.kind)
        try:
            data = client.get(res.path)
        except ApiError as err:
            if err.status == 404 and res.optional:
                continue
            if err.status == 404:
                raise ReadError(f"the API server has no {res.kind} resource: install kai's CRDs "
                                "(kubectl apply -k manifests/)") from None
            if err.status in (401, 403):
                raise ReadError(f"not allowed to list {res.kind}: {err.message}") from None
            raise ReadError(f"listing {res.kind} failed: {err.message}") from None
        except Exception as err:
            raise ReadError(f"cannot reach the API server at {client.host}: {err}") from None
        api_version = str(data.get("apiVersion") or "v1")
        for item in data.get("items") or []:
            item.setdefault("kind", res.kind)
            item.setdefault("apiVersion", api_version)
            out.append(item)
    return out
