"""The jobs on a real Spark Connect server (scripts/spark-connect-up.sh): core's answers, no JVM.

One server for the module, started by the script on a free port and stopped
with SIGTERM. The jobs reach it as a DAG task does (``--remote`` or
``CURSOROPS_SPARK_REMOTE``); their answers must be exactly the pure-``core`` ones,
and a job on the warm server must start no JVM of its own.

pyspark allows one kind of session per process, and the test run holds a
classic one (the ``spark`` fixture): every Connect client here is a process of
its own, as a CLI call or an Airflow task is.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.local import spark as local_spark
from cursorops.local.ports import free_port, listening
from cursorops.local.spark import ConnectServer
from cursorops.spark import analyze_backlog
from cursorops.spark.match_list import match_list_ids, read_match_list
from cursorops.spark.session import REMOTE_ENV, remote_url
from tests.spark_apps.topics import (
    TOPIC,
    Installation,
    core_analyses,
    core_matches,
    cursor_records,
    cursor_states,
    make_topic,
)

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "spark-connect-up.sh"


def _listener_pid(port: int) -> int | None:
    for connection in psutil.net_connections("tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port:
            return connection.pid
    return None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """The real Connect server, from the script, on a free port; SIGTERM stops it cleanly."""
    pytest.importorskip("pyspark")
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with local_spark.connect_server(
        log, driver_memory="1g", conf={"spark.sql.shuffle.partitions": "2"}
    ) as server:
        yield server
    # The JVM's shutdown hooks ran: the signal's exit status, port closed.
    code = server.process.returncode
    assert code in (0, 128 + signal.SIGTERM, -signal.SIGTERM), log.read_text()[-3000:]
    assert not listening(server.port)


def _python_daemons(pid: int) -> list[str]:
    """The command lines of the server's pyspark.daemon processes (one per Python worker pool)."""
    found = []
    for child in psutil.Process(pid).children():
        try:
            line = " ".join(child.cmdline())
        except psutil.Error:  # a zombie, or gone meanwhile
            continue
        if "pyspark.daemon" in line:
            found.append(line)
    return found


def _as_tuples(analyses: list[Any]) -> list[tuple[str, str, Any]]:
    return [(a.topic_partition, a.subscription, a.result) for a in analyses]


_CLIENT = """
import os, pickle, sys
with open(sys.argv[1], "rb") as source:
    code, values = pickle.load(source)
scope = dict(values)
try:
    exec(code, scope)
    outcome = ("ok", scope.get("result"))
except BaseException as exc:
    outcome = ("raised", f"{type(exc).__module__}.{type(exc).__name__}", str(exc))
with open(sys.argv[1], "wb") as sink:
    pickle.dump(outcome, sink)
"""


def _in_client(
    tmp_path: Path, code: str, env: dict[str, str] | None = None, **values: Any
) -> tuple[Any, ...]:
    """Run ``code`` in a new Python process (``values`` bound, ``result`` returned):
    ``("ok", result)`` or ``("raised", class path, message)``; its stderr in the last slot."""
    exchange = tmp_path / f"client-{time.monotonic_ns()}.pickle"
    exchange.write_bytes(pickle.dumps((textwrap.dedent(code), values)))
    environment = {k: v for k, v in os.environ.items() if k != REMOTE_ENV}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")])
    environment.update(env or {})
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, str(exchange)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: tuple[Any, ...] = pickle.loads(exchange.read_bytes())
    return (*outcome, done.stderr)


def _result(outcome: tuple[Any, ...]) -> Any:
    assert outcome[0] == "ok", outcome
    return outcome[1]


def test_analyze_backlog_on_connect_equals_core(server: ConnectServer, tmp_path: Path) -> None:
    topic = make_topic(tmp_path / "home", 11, partitions=3, messages=300)
    expected = core_analyses(topic.config, TOPIC)
    whole, page = _result(
        _in_client(
            tmp_path,
            """
            from cursorops.spark import analyze_backlog
            result = (
                analyze_backlog.run(config, topic, remote=url),
                # As large as the backlog: the counting pass runs, and the page is everything.
                analyze_backlog.run(config, topic, "filtered", max_entries=10**9, remote=url),
            )
            """,
            config=topic.config,
            topic=TOPIC,
            url=server.url,
        )
    )
    assert _as_tuples(whole) == _as_tuples(expected)
    assert sum(a.result.filter_rejected_messages for a in whole) > 0
    assert _as_tuples(page) == [t for t in _as_tuples(expected) if t[1] == "filtered"]


def test_find_and_apply_on_connect_equal_core_and_the_broker(
    server: ConnectServer, tmp_path: Path
) -> None:
    spark_side = make_topic(tmp_path / "spark", 61, partitions=3, messages=220)
    shutil.copytree(spark_side.config.home, tmp_path / "broker")
    broker_side = Installation(Config.from_home(tmp_path / "broker"), TOPIC, 3)
    predicate = {"properties": {"color": "blue"}}
    output = str(tmp_path / "plan")
    summary, outcome, after = _result(
        _in_client(
            tmp_path,
            """
            from cursorops.core.domain.analysis.predicates import parse_predicate
            from cursorops.spark import analyze_backlog, apply_skip_plan, find_messages
            found = find_messages.run(
                config, topic, "plain", parse_predicate(predicate), output, remote=url
            )
            applied = apply_skip_plan.run(config, topic, "plain", match_list=output, remote=url)
            result = (found, applied, analyze_backlog.run(config, topic, remote=url))
            """,
            config=spark_side.config,
            topic=TOPIC,
            url=server.url,
            predicate=predicate,
            output=output,
        )
    )
    found = sorted(read_match_list(output).column("message_id").to_pylist())
    assert found == core_matches(broker_side.config, TOPIC, "plain", parse_predicate(predicate))
    assert summary["matches"] == len(found) > 0
    ids = match_list_ids(read_match_list(output))
    with Broker(broker_side.config) as broker:
        reference = skips.skip_messages(broker.gated, "admin", TOPIC, "plain", ids).to_pulsar_json()
    assert sorted(outcome["skipped"]) == sorted(reference["skipped"])
    assert outcome["perPartition"] == dict(sorted(reference["perPartition"].items()))
    assert cursor_states(spark_side.config, TOPIC, "plain") == cursor_states(
        broker_side.config, TOPIC, "plain"
    )
    assert _as_tuples(after) == _as_tuples(core_analyses(spark_side.config, TOPIC))


def test_an_unreadable_segment_is_named_on_connect_and_changes_nothing(
    server: ConnectServer, tmp_path: Path
) -> None:
    topic = make_topic(tmp_path / "home", 82, partitions=2, messages=60)
    records = cursor_records(topic.config, TOPIC)
    with Broker(topic.config) as broker:
        partition = broker.metadata.get_topic(TOPIC).partition_names()[1]
        broken = broker.ledgers.segment_paths(TopicName.parse(partition))[-1]
    with open(broken, "wb") as sink:
        sink.write(b"this is not parquet")
    code, err = _result(
        _in_client(
            tmp_path,
            """
            import contextlib, io
            from cursorops.spark import analyze_backlog
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
                code = analyze_backlog.main(argv)
            result = (code, err.getvalue())
            """,
            argv=["--home", str(topic.config.home), "--remote", server.url, TOPIC],
        )
    )
    assert code == 6
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"Cannot read ledger segment {broken}" in errors[0], err
    assert cursor_records(topic.config, TOPIC) == records


_TWO_JOBS = """
import os
import psutil
from pyspark import SparkContext
from cursorops.spark import analyze_backlog

first = analyze_backlog.main(["--home", home, "--remote", url, topic, "--output", outputs[0]])
os.environ[remote_env] = url
second = analyze_backlog.main(["--home", home, topic, "--output", outputs[1]])
result = {
    "codes": [first, second],
    "children": [" ".join(c.cmdline()) for c in psutil.Process().children(recursive=True)],
    "sparkContext": SparkContext._active_spark_context is not None,
}
"""


def test_jobs_reach_the_warm_server_and_start_no_jvm(server: ConnectServer, tmp_path: Path) -> None:
    topic = make_topic(tmp_path / "home", 13, partitions=4, messages=200)
    pid = _listener_pid(server.port)
    assert pid == server.process.pid
    outputs = [str(tmp_path / "first.json"), str(tmp_path / "second.json")]
    outcome = _in_client(
        tmp_path,
        _TWO_JOBS,
        home=str(topic.config.home),
        url=server.url,
        topic=TOPIC,
        outputs=outputs,
        remote_env=REMOTE_ENV,
    )
    # Both jobs done, no process started by the client (no JVM), no SparkContext.
    assert _result(outcome) == {"codes": [0, 0], "children": [], "sparkContext": False}, outcome
    # The same JVM served both jobs, and is still up.
    assert _listener_pid(server.port) == pid and server.process.poll() is None
    # Every job of the module attached to one server-side session: one pool of Python
    # workers (a session per job would start and keep a pool per job).
    assert len(_python_daemons(pid)) == 1, _python_daemons(pid)
    expected = core_analyses(topic.config, TOPIC)
    for output in outputs:
        rows = json.loads(Path(output).read_text())["partitions"]
        assert [(r["topicPartition"], r["subscription"], r["entries"], r["messages"])
                for r in rows] == [(a.topic_partition, a.subscription, a.result.entries,
                                    a.result.messages) for a in expected]  # fmt: skip


def test_remote_url_comes_from_the_argument_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(REMOTE_ENV, raising=False)
    assert remote_url() is None
    assert remote_url("sc://10.0.0.1:15002") == "sc://10.0.0.1:15002"
    monkeypatch.setenv(REMOTE_ENV, "sc://127.0.0.1:15002")
    assert remote_url() == "sc://127.0.0.1:15002"
    # An empty argument forces classic Spark whatever the environment says.
    assert remote_url("") is None
    with pytest.raises(InvalidArgumentError, match="expected sc://host:port"):
        remote_url("spark://127.0.0.1:7077")


def test_a_bad_remote_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topic = make_topic(tmp_path / "home", 83, partitions=1, messages=20)
    argv = ["--home", str(topic.config.home), "--remote", "127.0.0.1:15002", TOPIC]
    assert analyze_backlog.main(argv) == 2
    err = capsys.readouterr().err
    assert err == "error: Invalid Spark Connect URL '127.0.0.1:15002': expected sc://host:port\n"


def test_an_unreachable_server_is_one_error_line_and_exit_6(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = make_topic(tmp_path / "home", 84, partitions=1, messages=20)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on that port once the probe is closed.
    argv = ["--home", str(topic.config.home), "--remote", f"sc://127.0.0.1:{port}", TOPIC]
    assert analyze_backlog.main(argv) == 6
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, errors
    assert errors[0].startswith(
        f"error: Cannot reach the Spark Connect server at 127.0.0.1:{port} ("
    )
    assert errors[0].endswith("): the ledgers cannot be scanned")


_TRY = """
from pyspark.sql.connect.session import SparkSession
from cursorops.spark.connect_channel import TokenChannelBuilder
session = SparkSession.builder.channelBuilder(TokenChannelBuilder(url)).create()
try:
    result = session.range(5).count()
finally:
    session.stop()
"""


def test_a_client_without_the_token_is_refused_one_with_it_works(
    server: ConnectServer, tmp_path: Path
) -> None:
    for url in (server.address, f"{server.address}/;token=not-{server.token}"):
        outcome = _in_client(tmp_path, _TRY, url=url)
        assert outcome[0] == "raised" and "UNAUTHENTICATED" in outcome[2], outcome
    # pyspark's own client too: the server refuses it, not only cursorops's channel.
    refused = _in_client(
        tmp_path,
        "from pyspark.sql import SparkSession\n"
        "result = SparkSession.builder.remote(url).create().range(5).count()",
        url=server.address,
    )
    assert refused[0] == "raised" and "No authentication token provided" in refused[2], refused
    # In the URL over plaintext (pyspark's channel would insist on TLS), or from the
    # environment variable pyspark reads, as the launchers' warm-up gives it.
    assert _result(_in_client(tmp_path, _TRY, url=server.url)) == 5
    from_env = {"SPARK_CONNECT_AUTHENTICATE_TOKEN": server.token}
    assert _result(_in_client(tmp_path, _TRY, from_env, url=server.address)) == 5


def test_a_token_never_shows_in_an_error() -> None:
    from cursorops.spark.session import redacted

    url = "sc://h:1/;user_id=a;token=s3cr3t;session_id=x"
    assert redacted(url) == "sc://h:1/;user_id=a;token=***;session_id=x"
    with pytest.raises(InvalidArgumentError) as raised:
        remote_url("h:1/;token=s3cr3t")
    assert "s3cr3t" not in str(raised.value)


def test_the_script_refuses_to_start_without_a_token() -> None:
    environment = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
    done = subprocess.run(
        [str(SCRIPT), "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )
    assert done.returncode == 2
    assert "set SPARK_CONNECT_AUTHENTICATE_TOKEN" in done.stderr


def test_the_script_refuses_a_bad_port() -> None:
    done = subprocess.run(
        [str(SCRIPT), "--port", "fifteen"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "spark-connect-up.sh: --port must be a number, not 'fifteen'"


# -- Airflow: the DAG's Spark tasks --------------------------------------------------------


def _connection(port: int, token: str = "") -> str:
    connection = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": port}
    return json.dumps({**connection, **({"password": token} if token else {})})


_TASKS = """
import logging

from cursorops.airflow.operators.spark import spark_job

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.name.startswith("cursorops."):
            lines.append((record.levelname, record.getMessage()))
logging.getLogger().addHandler(Keep())
spark_job("analyze_backlog", "analyze_backlog", [*home, topic, "--output", output]).execute({})
try:
    spark_job("analyze_backlog", "analyze_backlog", [*home, topic + "-missing"]).execute({})
    missing = None
except Exception as exc:
    missing = (f"{type(exc).__module__}.{type(exc).__name__}", str(exc))
result = (missing, lines)
"""


def test_a_dag_spark_task_runs_on_connect_when_the_connection_exists(
    server: ConnectServer, tmp_path: Path
) -> None:
    pytest.importorskip("airflow.providers.apache.spark")
    topic = make_topic(tmp_path / "home", 14, partitions=2, messages=120)
    output = tmp_path / "analysis.json"
    env = {
        "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT": _connection(server.port, server.token),
        # spark-submit would fail on this master: only the Connect path can answer.
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "spark://127.0.0.1:9"}',
    }
    outcome = _in_client(
        tmp_path,
        _TASKS,
        env,
        home=["--home", str(topic.config.home)],
        topic=TOPIC,
        output=str(output),
    )
    missing, lines = _result(outcome)
    # The job's lines reach the host's logging at their own level (Airflow records what a
    # task writes to stderr as errors), and none is written to stderr.
    assert lines and {level for level, _ in lines} <= {"INFO", "WARNING", "ERROR"}
    assert any(level == "INFO" for level, _ in lines)
    assert not [text for _, text in lines if text in outcome[-1]], outcome[-1][-2000:]
    rows = json.loads(output.read_text())["partitions"]
    assert [(r["topicPartition"], r["subscription"], r["entries"], r["messages"])
            for r in rows] == [(a.topic_partition, a.subscription, a.result.entries,
                                a.result.messages) for a in core_analyses(topic.config, TOPIC)
                               ]  # fmt: skip
    # A topic that does not exist fails the task for good: a retry would answer the same.
    assert missing is not None and missing[0].endswith(".AirflowFailException"), missing
    assert "exited with 3" in missing[1]


def test_the_connect_server_is_found_from_the_connection_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("airflow.providers.apache.spark")
    from cursorops.airflow.operators.spark import connect_url, permanent_exit_codes

    monkeypatch.delenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", raising=False)
    monkeypatch.delenv(REMOTE_ENV, raising=False)
    assert connect_url() is None
    monkeypatch.setenv(REMOTE_ENV, "sc://10.1.2.3:15002")
    assert connect_url() == "sc://10.1.2.3:15002"
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", _connection(15009))
    assert connect_url() == "sc://127.0.0.1:15009/"
    # The connection's password is the server's token.
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", _connection(15009, "t0k-en_x"))
    assert connect_url() == "sc://127.0.0.1:15009/;token=t0k-en_x"
    # Bad input, not found, not authorized; a conflict or a store failure may pass on retry.
    assert permanent_exit_codes() == {2, 3, 5}


def test_the_cli_spark_engine_on_connect_prints_the_python_document(
    server: ConnectServer, tmp_path: Path
) -> None:
    pytest.importorskip("cursorops.cli.main")
    topic = make_topic(tmp_path / "home", 101, partitions=3, messages=200)
    documents = _result(
        _in_client(
            tmp_path,
            """
            import contextlib, io, json, os
            import cursorops.cli.main
            # The Spark engine runs in the home's broker, which the CLI starts with this
            # environment: the Connect server is the broker's, never the request's.
            os.environ["CURSOROPS_SPARK_REMOTE"] = url
            result = []
            for engine in (["--engine", "python"], ["--engine", "spark"]):
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    assert cursorops.cli.main.main([*argv, *engine]) == 0
                result.append(json.loads(out.getvalue()))
            """,
            url=server.url,
            argv=[
                "--home",
                str(topic.config.home),
                "-o",
                "json",
                "topics",
                "analyze-backlog",
                TOPIC,
            ],  # fmt: skip
        )
    )
    assert documents[0] == documents[1]


def test_a_job_gets_a_session_of_its_own_when_the_shared_one_was_closed(
    server: ConnectServer, tmp_path: Path
) -> None:
    """Last in the module: it closes the shared session of the module's server."""
    topic = make_topic(tmp_path / "home", 15, partitions=2, messages=120)
    analyses = _result(
        _in_client(
            tmp_path,
            """
            from pyspark.sql.connect.session import SparkSession
            from cursorops.spark import analyze_backlog
            from cursorops.spark.connect_channel import TokenChannelBuilder
            from cursorops.spark.session import shared_session_id
            shared = f"{address}/;token={token};session_id={shared_session_id(address)}"
            # Releases it on the server.
            SparkSession.builder.channelBuilder(TokenChannelBuilder(shared)).create().stop()
            result = analyze_backlog.run(config, topic, remote=url)
            """,
            config=topic.config,
            topic=TOPIC,
            url=server.url,
            address=server.address,
            token=server.token,
        )
    )
    assert _as_tuples(analyses) == _as_tuples(core_analyses(topic.config, TOPIC))


def test_the_warm_up_runs_the_real_jobs_and_leaves_nothing_behind(
    server: ConnectServer, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outcome = _in_client(
        tmp_path,
        """
        from cursorops.spark import warm_up
        result = warm_up.main(["--remote", url])
        """,
        env={"TMPDIR": str(scratch)},
        url=server.url,
    )
    # find_messages found every pill of the throwaway topic (it raises otherwise), the audit
    # job ran, and the throwaway home is gone.
    assert _result(outcome) == 0, outcome
    assert "warmed up in" in outcome[-1]
    assert list(scratch.iterdir()) == []
