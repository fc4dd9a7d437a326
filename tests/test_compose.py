"""docker-compose.yml is checked by validating it: no Docker engine runs on the test machines."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BROKERS = ("broker-1", "broker-2")


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
        *BROKERS,
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
    for name in ("airflow-scheduler", "spark-worker", *BROKERS):
        assert any(v.startswith("ledgers:") for v in services[name]["volumes"]), name


def test_image_installs_the_project_and_one_consistent_spark() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install" in dockerfile and "/opt/cursorops" in dockerfile
    assert "--force-reinstall --no-deps pyspark==" in dockerfile


AIRFLOW_COMPONENTS = (
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
)


def test_airflow_components_share_one_secret_and_a_psycopg3_database() -> None:
    services = load()["services"]
    envs = [services[name]["environment"] for name in AIRFLOW_COMPONENTS]
    # The scheduler signs task tokens the api-server checks: one secret, from the deployer.
    secrets = {env["AIRFLOW__API_AUTH__JWT_SECRET"] for env in envs}
    assert len(secrets) == 1 and "${CURSOROPS_JWT_SECRET:?" in secrets.pop()
    for env in envs:
        url = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert url.startswith("postgresql+psycopg://") and "@postgres:5432/airflow" in url
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] == url


def test_spark_default_is_the_compose_master() -> None:
    import json

    services = load()["services"]
    master = services["spark-master"]["command"]
    host = master[master.index("--host") + 1]
    assert any(p.split(":")[-1] == "7077" for p in services["spark-master"]["ports"])
    for name in AIRFLOW_COMPONENTS:
        connection = json.loads(services[name]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert connection == {"conn_type": "spark", "host": f"spark://{host}:7077"}, name
    worker = services["spark-worker"]["command"]
    assert f"spark://{host}:7077" in worker
    # The cluster needs no Airflow: it starts on its own.
    assert "depends_on" not in services["spark-master"]


def test_cursorops_default_names_the_store_the_cli_of_each_component_uses() -> None:
    import json

    from cursorops.airflow.hooks.cursorops import config_from
    from cursorops.core.config import Config

    services = load()["services"]
    for name in AIRFLOW_COMPONENTS:
        environment = services[name]["environment"]
        connection = json.loads(environment["AIRFLOW_CONN_CURSOROPS_DEFAULT"])
        assert connection["conn_type"] == "cursorops", name
        # What a task's hook opens, with nothing from the environment to fall back on, is
        # the installation the CLI of the same container opens from its variables.
        assert config_from(connection["extra"], {}) == Config.from_environ(environment), name


def test_api_server_listens_where_the_workers_call_it() -> None:
    services = load()["services"]
    api = services["airflow-api-server"]
    command = api["command"]
    assert command[:2] == ["airflow", "api-server"]
    assert command[command.index("--host") + 1] == "0.0.0.0"
    port = command[command.index("--port") + 1]
    assert f"{port}:{port}" in api["ports"]
    execution = api["environment"]["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"]
    assert execution == f"http://airflow-api-server:{port}/execution/"
    assert "healthcheck" in api


def option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def host_port(service: dict, container_port: str, address: str = "") -> str:  # type: ignore[type-arg]
    """The host port ``service`` publishes its ``container_port`` on, on the host's
    ``address`` (every address when empty)."""
    (found,) = [
        p.split(":")[-2]
        for p in service["ports"]
        if p.split(":")[-1] == container_port
        and p.split(":")[:-2] == ([address] if address else [])
    ]
    return found


def test_two_brokers_serve_the_shared_store_and_answer_reachable_addresses() -> None:
    from cursorops.core.config import Config
    from cursorops.wire.listeners import parse_advertised_listeners

    services = load()["services"]
    homes = set()
    external = set()
    for name in BROKERS:
        broker = services[name]
        command = broker["command"]
        # The image's entrypoint runs a first word other than bash or python as an
        # airflow subcommand: the standalone starts through python.
        assert command[:4] == ["python", "-m", "cursorops.cli.main", "standalone"], name
        assert option(command, "--bind") == "0.0.0.0", name
        port, web = option(command, "--broker-port"), option(command, "--web-port")
        listeners = parse_advertised_listeners(option(command, "--advertised-listeners"))
        # A lookup naming no listener answers the first: the address on the compose network.
        assert list(listeners) == ["internal", "external"], name
        assert listeners["internal"].broker_url == f"pulsar://{name}:{port}", name
        # The host reaches the port Docker publishes for the broker port, on its loopback
        # only: no authentication is on, so every client acts as the broker's own role.
        outside = listeners["external"].broker_url
        assert outside == f"pulsar://localhost:{host_port(broker, port, '127.0.0.1')}", name
        external.add(outside)
        host_port(broker, web, "127.0.0.1")
        health = broker["healthcheck"]["test"]
        assert health[-1] == f"http://127.0.0.1:{web}/admin/v2/brokers/health", name
        assert broker["depends_on"]["airflow-init"] == {
            "condition": "service_completed_successfully"
        }, name
        config = Config.from_environ(broker["environment"])
        assert f"ledgers:{config.home}" in broker["volumes"], name
        assert config.ledger_root == str(config.home / "ledgers"), name
        homes.add((config.home, config.metadata_url))
    # One home on the one volume and one store: the brokers take slots of it.
    assert len(homes) == 1
    assert len(external) == len(BROKERS)


def test_the_broker_healthcheck_is_a_route_the_standalone_serves() -> None:
    from cursorops.wire.admin import router

    paths = {route.path for route in router(None, lambda _request: "", "admin").routes}  # type: ignore[arg-type]
    assert "/admin/v2/brokers/health" in paths


def test_every_command_on_the_image_passes_its_entrypoint() -> None:
    # apache/airflow's entrypoint execs bash and python commands and runs any other first
    # word as `airflow <word>`: `spark-class ...` would be `airflow spark-class ...`.
    for name, service in load()["services"].items():
        if service.get("image") == "cursorops:latest" and "command" in service:
            assert service["command"][0] in ("bash", "python", "airflow"), name
            assert "entrypoint" not in service, name


def test_no_two_services_publish_one_host_port() -> None:
    published = [
        port.split(":")[-2]
        for service in load()["services"].values()
        for port in service.get("ports", [])
    ]
    assert len(published) == len(set(published)), sorted(published)


@pytest.mark.slow
def test_no_component_logs_in_to_airflow_and_airflow_init_migrates_both_stores(
    tmp_path: Path,
) -> None:
    import os
    import sqlite3
    import subprocess
    import sys

    from cursorops.core.store.schema import HEAD_REVISION

    services = load()["services"]
    assert services["airflow-init"]["command"] == [
        "bash",
        "/opt/cursorops/scripts/compose-airflow-init.sh",
    ]
    for name in (*AIRFLOW_COMPONENTS, "airflow-init"):
        environment = services[name]["environment"]
        # The gates record the answers they are resumed with; nothing reads Airflow's API.
        logins = [k for k in environment if k.startswith("AIRFLOW_CONN_") and "API" in k]
        assert logins == [], name
        assert not [k for k in environment if k.endswith("_PASSWORD")], name
        users = environment["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"]
        assert users == "${CURSOROPS_AIRFLOW_USERS:-admin:admin}", name

    # The script itself, with the real airflow on a throwaway SQLite database.
    bin_dir = Path(sys.executable).parent
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "compose-airflow-init.sh")],
        env={
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "AIRFLOW_HOME": str(tmp_path / "airflow"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'airflow.db'}",
            "CURSOROPS_HOME": str(tmp_path / "cursorops"),
            "CURSOROPS_METADATA_URL": f"sqlite:///{tmp_path / 'cursorops.db'}",
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "airflow.db").stat().st_size > 0
    # The cursorops metadata store was migrated first (a shared one refuses commands until then).
    assert "Migrated the metadata store" in run.stdout
    with sqlite3.connect(tmp_path / "cursorops.db") as store:
        (revision,) = store.execute("SELECT version_num FROM alembic_version").fetchone()
    assert revision == HEAD_REVISION

    missing = subprocess.run(
        ["bash", str(ROOT / "scripts" / "compose-airflow-init.sh")],
        env={k: v for k, v in os.environ.items() if k != "CURSOROPS_METADATA_URL"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode != 0 and "CURSOROPS_METADATA_URL" in missing.stderr
