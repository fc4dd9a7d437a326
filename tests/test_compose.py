"""docker-compose.yml is checked by validating it: no Docker engine runs on the test machines."""

from __future__ import annotations

import re
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
    from sqlalchemy.engine import make_url

    services = load()["services"]
    urls = {
        name: make_url(s["environment"]["CURSOROPS_METADATA_URL"])
        for name, s in services.items()
        if "environment" in s and "CURSOROPS_METADATA_URL" in s["environment"]
    }
    # One store: the writers as its owner, the Spark services as its reader.
    assert {(u.host, u.port, u.database) for u in urls.values()} == {
        ("postgres", 5432, "cursorops")
    }
    assert {urls[name].username for name in (*AIRFLOW_COMPONENTS, *BROKERS)} == {"cursorops"}
    assert {urls[name].username for name in SPARK_SERVICES} == {"cursorops_reader"}
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
SPARK_SERVICES = ("spark-master", "spark-worker", "spark-connect")


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
    from cursorops.core.domain.config import Config

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
    from cursorops.core.domain.config import Config
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


# -- No door around the gate ------------------------------------------------------------

PUBLISHED = {
    # Airflow's api-server, behind its login: every interface.
    ("airflow-api-server", "8080"): "",
    # The brokers and their admin ports: no authentication is on, the host's loopback only.
    ("broker-1", "6650"): "127.0.0.1",
    ("broker-1", "8080"): "127.0.0.1",
    ("broker-2", "6650"): "127.0.0.1",
    ("broker-2", "8080"): "127.0.0.1",
}
"""Each published container port, and the host address it is published on ("" = all)."""

SECRETS = {
    "CURSOROPS_JWT_SECRET",
    "CURSOROPS_POSTGRES_PASSWORD",
    "CURSOROPS_DB_PASSWORD",
    "CURSOROPS_READER_PASSWORD",
    "CURSOROPS_AIRFLOW_DB_PASSWORD",
    "CURSOROPS_SPARK_CONNECT_TOKEN",
}
"""What the operator must set; README's production section names each."""

_REQUIRED = re.compile(r"^\$\{([A-Z0-9_]+):\?[^}]+\}$")
_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(?::?([?-])([^}]*))?\}")


def _published(port: object) -> tuple[str, str]:
    """(host address, container port) of a short-syntax ``ports`` entry."""
    parts = str(port).split(":")
    if len(parts) == 1:
        return "", parts[0]
    return ":".join(parts[:-2]), parts[-1]


def published_ports(compose: dict) -> set[tuple[str, str, str]]:  # type: ignore[type-arg]
    return {
        (name, *_published(port))
        for name, service in compose["services"].items()
        for port in service.get("ports", [])
    }


def check_published(compose: dict) -> list[str]:  # type: ignore[type-arg]
    """What is published beyond :data:`PUBLISHED`, or on more interfaces than it says."""
    wrong = []
    for name, address, port in sorted(published_ports(compose)):
        allowed = PUBLISHED.get((name, port))
        if allowed is None:
            wrong.append(f"{name} publishes {port}")
        elif address != allowed and not (address == "127.0.0.1" and allowed == ""):
            wrong.append(f"{name} publishes {port} on {address or 'every interface'}")
    return wrong


def _strings(node: object, path: str = "") -> list[tuple[str, str]]:
    """Every (path, string) in the YAML tree, keys' values and list items alike."""
    if isinstance(node, dict):
        return [item for key, value in node.items() for item in _strings(value, f"{path}.{key}")]
    if isinstance(node, list):
        return [item for i, value in enumerate(node) for item in _strings(value, f"{path}[{i}]")]
    return [(path, node)] if isinstance(node, str) else []


def _is_secret_key(key: str) -> bool:
    """Named for a secret (a ``..._FILE`` names where one is kept)."""
    upper = key.upper()
    return not upper.endswith("_FILE") and any(
        word in upper for word in ("PASSWORD", "SECRET", "TOKEN")
    )


def check_credentials(compose: dict) -> list[str]:  # type: ignore[type-arg]
    """Literal credentials: a URL's password, a JSON connection's password, a variable
    named for a secret, that is not the operator's own ``${VAR:?message}``. A default
    (``${VAR:-...}``) is a literal too."""
    import json

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    wrong = []
    for path, value in _strings(compose):
        key = path.rsplit(".", 1)[-1]
        if _is_secret_key(key) and not _REQUIRED.match(value):
            wrong.append(f"{path} is not a required variable: {value!r}")
        for user_info in re.findall(r"://([^/@\s]*)@", value):
            _, colon, password = user_info.partition(":")
            if colon and not _REQUIRED.match(password):
                wrong.append(f"{path} holds a literal password in {value!r}")
        if value.lstrip().startswith("{"):
            try:
                document = json.loads(value)
            except ValueError:
                continue
            password = document.get("password") if isinstance(document, dict) else None
            if password is not None and not _REQUIRED.match(str(password)):
                wrong.append(f"{path} holds a literal password in its JSON")
        if "postgresql" in value and "://" in value and "@" in value and "$" not in value:
            try:
                if make_url(value).password:
                    wrong.append(f"{path} holds a literal password")
            except ArgumentError:
                pass
    return wrong


def _reader_grants() -> list[str]:
    """What scripts/compose-init-db.sh grants cursorops_reader."""
    script = (ROOT / "scripts" / "compose-init-db.sh").read_text()
    statements = " ".join(script.split()).split(";")
    return [
        s.strip() for s in statements if "GRANT" in s and s.strip().endswith("cursorops_reader")
    ]


def check_spark_cannot_write(compose: dict) -> list[str]:  # type: ignore[type-arg]
    """A Spark service runs whatever code reaches it: it may hold a metadata URL only of a
    role that writes nothing (cursorops_reader, granted SELECT alone), and nothing of the
    writer's or Airflow's database."""
    reader_grants = _reader_grants()
    wrong = []
    services = compose["services"]
    for name in SPARK_SERVICES:
        environment = services[name].get("environment", {})
        text = "\n".join(value for _, value in _strings(environment))
        for variable in ("CURSOROPS_DB_PASSWORD", "CURSOROPS_AIRFLOW_DB_PASSWORD"):
            if variable in text:
                wrong.append(f"{name} holds {variable}")
        if re.search(r"@[^/\s]+/airflow\b", text):
            wrong.append(f"{name} holds Airflow's database")
        for path, value in _strings(environment):
            for role in re.findall(r"postgresql[+\w]*://([^:@/]+)", value):
                if role != "cursorops_reader":
                    wrong.append(f"{name} connects to the store as {role} ({path})")
    if not reader_grants:
        wrong.append("compose-init-db.sh grants cursorops_reader nothing")
    for grant in reader_grants:
        granted = grant.split(" ON ", 1)[0].rsplit("GRANT ", 1)[-1]
        if {p.strip() for p in granted.split(",")} - {"SELECT", "USAGE", "CONNECT"}:
            wrong.append(f"cursorops_reader may write: {grant}")
    return wrong


def test_only_airflow_and_the_brokers_are_published() -> None:
    compose = load()
    assert check_published(compose) == []
    # Every listed one is published: the list is what the README tells operators.
    assert {(name, port) for name, _, port in published_ports(compose)} == set(PUBLISHED)


def test_no_literal_credential_is_shipped() -> None:
    compose = load()
    assert check_credentials(compose) == []
    required = {
        match.group(1)
        for _, value in _strings(compose)
        for match in _VARIABLE.finditer(value)
        if match.group(2) == "?"
    }
    assert required >= SECRETS
    readme = (ROOT / "README.md").read_text()
    assert not [name for name in SECRETS if name not in readme]


def test_no_spark_service_holds_a_role_that_writes_cursor_state() -> None:
    assert check_spark_cannot_write(load()) == []


def test_spark_connect_requires_the_token_airflow_s_connection_carries() -> None:
    import json

    services = load()["services"]
    token = services["spark-connect"]["environment"]["SPARK_CONNECT_AUTHENTICATE_TOKEN"]
    assert _REQUIRED.match(token)
    assert services["spark-connect"]["command"][1].endswith("scripts/spark-connect-up.sh")
    for name in AIRFLOW_COMPONENTS:
        environment = services[name]["environment"]
        connection = json.loads(environment["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
        assert connection["password"] == token, name
        assert "SPARK_CONNECT_AUTHENTICATE_TOKEN" not in environment, name
    for name in BROKERS:
        # A broker needs neither Airflow's database nor Spark's token.
        text = json.dumps(services[name]["environment"])
        assert "SQL_ALCHEMY_CONN" not in text and "SPARK_CONNECT" not in text, name


def _with_service(compose: dict, name: str, **service: object) -> dict:  # type: ignore[type-arg]
    import copy

    changed = copy.deepcopy(compose)
    changed["services"][name] = {**changed["services"][name], **service}
    return changed


def test_the_checks_catch_each_door_they_guard() -> None:
    compose = load()
    master = compose["services"]["spark-master"]
    assert check_published(_with_service(compose, "spark-master", ports=["7077:7077"])) == [
        "spark-master publishes 7077"
    ]
    assert check_published(_with_service(compose, "spark-connect", ports=["15002"])) == [
        "spark-connect publishes 15002"
    ]
    broker_everywhere = ["6650:6650", "127.0.0.1:8082:8080"]
    assert check_published(_with_service(compose, "broker-1", ports=broker_everywhere)) == [
        "broker-1 publishes 6650 on every interface"
    ]

    postgres = compose["services"]["postgres"]
    literal = {**postgres["environment"], "POSTGRES_PASSWORD": "cursorops"}
    assert check_credentials(_with_service(compose, "postgres", environment=literal))
    defaulted = {**postgres["environment"], "POSTGRES_PASSWORD": "${PG:-cursorops}"}
    assert check_credentials(_with_service(compose, "postgres", environment=defaulted))
    in_url = {**master["environment"], "X": "postgresql+psycopg://u:pw@postgres:5432/cursorops"}
    assert check_credentials(_with_service(compose, "spark-master", environment=in_url))

    writer = compose["services"]["broker-1"]["environment"]["CURSOROPS_METADATA_URL"]
    as_writer = {**master["environment"], "CURSOROPS_METADATA_URL": writer}
    assert check_spark_cannot_write(_with_service(compose, "spark-master", environment=as_writer))
    airflow_env = compose["services"]["airflow-scheduler"]["environment"]
    assert check_spark_cannot_write(_with_service(compose, "spark-worker", environment=airflow_env))


def _interpolate(value: str, environ: dict[str, str]) -> str:
    """Compose's ``${VAR:?message}`` / ``${VAR:-default}`` / ``$$``: what it substitutes,
    or ValueError for a required variable that is unset or empty."""

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.group(1), match.group(2), match.group(3)
        found = environ.get(name, "")
        if kind == "?" and not found:
            raise ValueError(f"{name}: {rest}")
        return found or (rest if kind == "-" else "")

    return _VARIABLE.sub(one, value.replace("$$", "\0")).replace("\0", "$")


def test_compose_refuses_to_start_without_each_secret_and_resolves_with_them() -> None:
    import json

    from sqlalchemy.engine import make_url

    raw = (ROOT / "docker-compose.yml").read_text()
    environ = {name: f"value-of-{name.lower().replace('_', '-')}" for name in SECRETS}
    resolved = yaml.safe_load(_interpolate(raw, environ))
    for name in SECRETS:
        with pytest.raises(ValueError, match=name):
            _interpolate(raw, {k: v for k, v in environ.items() if k != name})
    services = resolved["services"]
    for name in (*AIRFLOW_COMPONENTS, *BROKERS):
        url = make_url(services[name]["environment"]["CURSOROPS_METADATA_URL"])
        assert url.password == environ["CURSOROPS_DB_PASSWORD"], name
    for name in AIRFLOW_COMPONENTS:
        environment = services[name]["environment"]
        extra = json.loads(environment["AIRFLOW_CONN_CURSOROPS_DEFAULT"])["extra"]
        assert extra["metadata_url"] == environment["CURSOROPS_METADATA_URL"], name
        airflow = make_url(environment["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        assert (airflow.username, airflow.password) == (
            "airflow",
            environ["CURSOROPS_AIRFLOW_DB_PASSWORD"],
        ), name
        connect = json.loads(environment["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
        assert connect["password"] == environ["CURSOROPS_SPARK_CONNECT_TOKEN"], name
    for name in SPARK_SERVICES:
        url = make_url(services[name]["environment"]["CURSOROPS_METADATA_URL"])
        assert url.password == environ["CURSOROPS_READER_PASSWORD"], name
    postgres = services["postgres"]["environment"]
    assert postgres["POSTGRES_PASSWORD"] == environ["CURSOROPS_POSTGRES_PASSWORD"]


def test_the_operator_s_env_file_is_neither_committed_nor_in_the_image() -> None:
    for ignore in (".gitignore", ".dockerignore"):
        lines = (ROOT / ignore).read_text().splitlines()
        assert ".env" in lines, ignore


def _compose_command() -> list[str] | None:
    """``docker compose`` (v2) or ``docker-compose`` (v1), whichever runs here; None if
    neither does. ``config`` needs no Docker engine."""
    import shutil
    import subprocess

    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        probe = subprocess.run([*command, "version"], capture_output=True, timeout=60)
        if probe.returncode == 0:
            return command
    return None


def test_docker_compose_config_validates_and_refuses_a_missing_secret(tmp_path: Path) -> None:
    import os
    import subprocess

    command = _compose_command()
    if command is None:
        pytest.skip("neither docker compose nor docker-compose is installed")
    environ = {name: f"value-{i}" for i, name in enumerate(sorted(SECRETS))}
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}

    empty = tmp_path / "empty.env"
    empty.write_text("")

    def config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        # An empty --env-file: an operator's .env in the checkout must not answer for env.
        compose = ["-f", str(ROOT / "docker-compose.yml"), "--env-file", str(empty)]
        return subprocess.run(
            [*command, *compose, "config"],
            env={**base, **env},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = config(environ)
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    services = resolved["services"]
    assert {name for name, s in services.items() if s.get("ports")} == {
        "airflow-api-server",
        *BROKERS,
    }
    assert check_spark_cannot_write(resolved) == []
    for name in sorted(SECRETS):
        missing = config({k: v for k, v in environ.items() if k != name})
        assert missing.returncode != 0, name
        assert f"set {name}" in missing.stderr, (name, missing.stderr)
