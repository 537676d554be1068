"""The Kubernetes manifests (deploy/k8s/) pass the API's own schemas (kubernetes-validate ships
them: no cluster, no network), and say what docs/scale-out.md says of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from service_incident.server.settings import Settings

K8S = Path(__file__).resolve().parent.parent / "deploy" / "k8s"
VERSION = "1.30.0"


def documents() -> list[dict[str, Any]]:
    return [doc for path in sorted(K8S.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


def resources() -> list[dict[str, Any]]:
    return [doc for doc in documents() if doc["kind"] != "Kustomization"]


@pytest.mark.parametrize("resource", resources(), ids=lambda r: f"{r['kind']}/{r['metadata']['name']}")
def test_every_manifest_passes_the_kubernetes_schema_strictly(resource: dict[str, Any]) -> None:
    kubernetes_validate.validate(resource, VERSION, strict=True)


def test_the_kustomization_lists_every_manifest() -> None:
    (kustomization,) = [doc for doc in documents() if doc["kind"] == "Kustomization"]
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"
    )


def test_the_deployment_probes_health_and_shares_the_redis_store() -> None:
    kinds = {(r["kind"], r["metadata"]["name"]): r for r in resources()}
    server = kinds[("Deployment", "service-incident")]["spec"]["template"]["spec"]
    (container,) = server["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    env = {item["name"]: item["value"] for item in container["env"]}
    # Only names the server reads: a misspelt setting would be silently ignored by a pod.
    assert {name.lower() for name in env} <= set(Settings.__struct_fields__)
    assert env["EPISODE_STORE"].startswith("redis://service-incident-redis:")
    assert ("Service", "service-incident-redis") in kinds
    assert server["terminationGracePeriodSeconds"] > 5  # longer than the drain
    assert {"HorizontalPodAutoscaler", "PodDisruptionBudget", "Ingress", "Service"} <= {k for k, _ in kinds}
    hashed = [r for (k, _), r in kinds.items() if k == "Ingress" and "upstream-hash-by" in str(r["metadata"])]
    assert hashed and "$http_episode_id" in str(hashed[0]["metadata"]["annotations"])
