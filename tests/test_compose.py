"""docker-compose.yml is checked by validating it: no Docker engine runs on the test machines."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def load() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_references_resolve() -> None:
    compose = load()
    services = compose["services"]
    for needed in (
        "postgres",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
    ):
        assert needed in services, needed
    volumes = set(compose.get("volumes", {}))
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        assert "command" in service or "image" in service, name
        depends = service.get("depends_on", [])
        for dependency in depends if isinstance(depends, list) else depends.keys():
            assert dependency in services, f"{name} depends on unknown {dependency}"
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in volumes, f"{name} uses undeclared volume {source}"


def test_every_component_shares_one_metadata_store_and_ledger_volume() -> None:
    services = load()["services"]
    urls = {
        s["environment"]["CURSOROPS_METADATA_URL"]
        for s in services.values()
        if "environment" in s and "CURSOROPS_METADATA_URL" in s["environment"]
    }
    assert urls == {"postgresql+psycopg://cursorops:cursorops@postgres:5432/cursorops"}
    for name in ("airflow-scheduler", "spark-worker"):
        assert any(v.startswith("ledgers:") for v in services[name]["volumes"]), name


def test_image_installs_the_project_and_one_consistent_spark() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install" in dockerfile and "/opt/cursorops" in dockerfile
    assert "--force-reinstall --no-deps pyspark==" in dockerfile
