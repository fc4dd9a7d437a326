"""``cursorops daemon``: commands handed to a warm process answer as they would in-process.

Every command here runs through the real entry point (``python -m cursorops.cli.launcher``,
what the installed ``cursorops`` script calls) in a new process, against a real
daemon started with ``cursorops daemon start``. The same command with
``CURSOROPS_DAEMON=off`` runs in-process; stdout, stderr and exit codes must be
the same. The daemon's own count of commands it took proves which way a command
went.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cursorops.cli import daemon, launcher
from cursorops.core.broker import Broker
from cursorops.core.config import Config
from cursorops.core.producer import OutgoingMessage
from cursorops.core.subscription import SubscriptionType
from tests import leftovers

pytestmark = pytest.mark.e2e

TOPIC = "persistent://warm/ns/orders"
MESSAGES = 200
REPO = Path(__file__).resolve().parents[2]


def clean_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without CURSOROPS_* variables, plus ``extra``."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    environment.update(extra or {})
    return environment


def launch(
    entry: list[str], home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python <entry> --home HOME ARGS`` in a new process, from the repository."""
    return subprocess.run(
        [sys.executable, *entry, "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=clean_environment(env),
        timeout=120,
        check=False,
        cwd=REPO,
    )


def cursorops(
    home: Path, *args: str, env: dict[str, str] | None = None, metadata_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The command through the console script's entry point, in a new process."""
    store = ["--metadata-url", metadata_url] if metadata_url is not None else []
    return launch(["-m", "cursorops.cli.launcher"], home, *store, *args, env=env)


def in_process(home: Path, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {**kwargs.pop("env", {}), "CURSOROPS_DAEMON": "off"}
    return cursorops(home, *args, env=env, **kwargs)


def taken(home: Path, metadata_url: str | None = None) -> int:
    state = daemon.status(daemon.Address(str(home), metadata_url))
    assert state["running"], state
    return int(state["served"])


def make_topic(config: Config) -> None:
    with Broker(config) as broker:
        broker.create_tenant("admin", "warm")
        broker.create_namespace("admin", "warm/ns")
        broker.create_topic("admin", TOPIC)
        for name in ("sub", "skipper"):
            broker.create_subscription(
                "admin", TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
            )
        broker.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(MESSAGES)])


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A SQLite home with a topic, and its daemon (stopped at the end of the module)."""
    root = tmp_path_factory.mktemp("warm")
    make_topic(Config.from_home(root))
    started = cursorops(root, "-o", "json", "daemon", "start", "--idle-timeout", "10m")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["started"] is True
    try:
        yield root
    finally:
        cursorops(root, "daemon", "stop")


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "stats", TOPIC),
        ("-o", "json", "topics", "stats", TOPIC),
        ("topics", "analyze-backlog", TOPIC, "-s", "sub"),
        ("-o", "json", "topics", "peek-messages", TOPIC, "-s", "sub", "-n", "3"),
        ("topics", "stats", "persistent://warm/ns/missing"),
        ("topics", "skip-messages", TOPIC, "-s", "sub", "--messageId-triplet", "1:-2"),
        ("topics", "bogus"),
        ("--role", "nobody", "topics", "stats", TOPIC),
        ("topics", "stats", "--help"),
    ],
    ids=["stats", "json", "analyze", "peek", "not-found", "bad-id", "usage", "role", "help"],
)
def test_the_daemon_answers_as_the_command_does_in_process(
    home: Path, args: tuple[str, ...]
) -> None:
    before = taken(home)
    warm = cursorops(home, *args)
    assert taken(home) == before + 1
    cold = in_process(home, *args)
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        cold.returncode,
        cold.stdout,
        cold.stderr,
    )
    assert "Traceback" not in warm.stderr


def test_a_skip_through_the_daemon_changes_the_store(home: Path) -> None:
    before = taken(home)
    done = cursorops(
        home,
        "-o",
        "json",
        "topics",
        "skip-messages",
        TOPIC,
        "-s",
        "skipper",
        "--messageId-triplet",
        "1:5",
        "1:6",
    )
    assert done.returncode == 0, done.stderr
    assert [m["triplet"] for m in json.loads(done.stdout)["skipped"]] == ["1:5", "1:6"]
    assert taken(home) == before + 1
    stats = json.loads(in_process(home, "-o", "json", "topics", "stats", TOPIC).stdout)
    assert stats["subscriptions"]["skipper"]["msgBacklog"] == MESSAGES - 2


def test_concurrent_commands_each_run_in_their_own_worker(home: Path) -> None:
    """Eight skips at once through the daemon: each applied once, none lost."""
    triplets = [f"1:{100 + i}" for i in range(8)]
    before = taken(home)
    with ThreadPoolExecutor(8) as pool:
        runs = list(
            pool.map(
                lambda t: cursorops(
                    home,
                    "topics",
                    "skip-messages",
                    TOPIC,
                    "-s",
                    "skipper",
                    "--messageId-triplet",
                    t,
                ),
                triplets,
            )
        )
    assert [r.returncode for r in runs] == [0] * 8, [r.stderr for r in runs]
    assert taken(home) == before + 8
    stats = json.loads(in_process(home, "-o", "json", "topics", "stats", TOPIC).stdout)
    assert stats["subscriptions"]["skipper"]["msgBacklog"] == MESSAGES - 2 - 8


RUNNER = (
    "import json, sys\n"
    "from cursorops.cli import launcher\n"
    "code = launcher.main(sys.argv[1:])\n"
    "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    "sys.exit(code)\n"
)
"""The console script's entry point, reporting on stderr every module the caller imported."""


def caller_modules(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = launch(["-c", RUNNER], home, *args, env=env)
    last = done.stderr.rsplit("\n", 1)[-1]
    return done, set(json.loads(last))


def test_the_client_imports_only_the_standard_library(home: Path) -> None:
    done, modules = caller_modules(home, "-o", "json", "topics", "stats", TOPIC)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["subscriptions"]["sub"]["msgBacklog"] == MESSAGES
    ours = sorted(
        m for m in modules if m.startswith(("cursorops.core", "cursorops.spark", "cursorops.rest"))
    )
    heavy = sorted(
        m
        for m in modules
        if m.split(".")[0] in ("numpy", "pyarrow", "sqlalchemy", "pydantic", "pandas", "argparse")
    )
    assert (ours, heavy) == ([], [])
    assert {
        "cursorops.cli",
        "cursorops.cli.launcher",
    } <= modules and "cursorops.cli.main" not in modules


def test_an_interrupt_reaches_the_command(home: Path, tmp_path: Path) -> None:
    """Ctrl-C on the caller interrupts the worker: "error: interrupted", exit 130, as in-process.

    The caller forwards signals from before it sends the command, so the signal is
    sent as soon as the daemon has forked the worker.
    """
    environment = clean_environment()
    before = taken(home)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cursorops.cli.launcher",
            "--home",
            str(home),
            "produce",
            TOPIC,
            "-m",
            "x" * 100,
            "-n",
            "1000000",
            "--batch-size",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=REPO,
    )
    address = daemon.Address(str(home), None)
    deadline = time.monotonic() + 30
    while taken(home) == before:
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, (stdout, stderr)
    assert stderr.strip().splitlines() == ["error: interrupted"]
    assert daemon.status(address)["running"]


def test_another_ledger_root_runs_in_process(home: Path, tmp_path: Path) -> None:
    """Same home and metadata store, other CURSOROPS_LEDGER_ROOT: the daemon declines."""
    elsewhere = {"CURSOROPS_LEDGER_ROOT": str(tmp_path / "ledgers")}
    warm, modules = caller_modules(home, "topics", "stats", TOPIC, env=elsewhere)
    assert "cursorops.cli.main" in modules
    cold = in_process(home, "topics", "stats", TOPIC, env=elsewhere)
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)
    assert warm.returncode == 6 and "Cannot read ledger segment" in warm.stderr


def test_a_daemon_of_older_code_declines_and_reports_itself_stale(home: Path) -> None:
    source = REPO / "core" / "analysis" / "topic_stats.py"
    info = source.stat()
    before = taken(home)
    try:
        os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
        warm = cursorops(home, "-o", "json", "topics", "stats", TOPIC)
        assert warm.returncode == 0, warm.stderr
        assert json.loads(warm.stdout)["subscriptions"]["sub"]["msgBacklog"] == MESSAGES
        assert taken(home) == before
        status = cursorops(home, "daemon", "status")
        assert status.returncode == 0, status.stderr
        assert "code:           stale" in status.stdout
    finally:
        os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns))
    status = json.loads(cursorops(home, "-o", "json", "daemon", "status").stdout)
    assert status["running"] and not status["stale"]
    assert cursorops(home, "topics", "stats", TOPIC).returncode == 0
    assert taken(home) == before + 1


def test_start_twice_keeps_the_running_daemon(home: Path) -> None:
    pid = daemon.status(daemon.Address(str(home), None))["pid"]
    again = cursorops(home, "-o", "json", "daemon", "start")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["started"] is False
    assert json.loads(again.stdout)["pid"] == pid


def test_ps_shows_the_daemon_as_cursorops_daemon(home: Path) -> None:
    pid = daemon.status(daemon.Address(str(home), None))["pid"]
    shown = subprocess.run(
        ["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert shown == f"cursorops daemon {home}"
    found = subprocess.run(
        ["pgrep", "-f", f"^cursorops daemon {home}$"], capture_output=True, text=True, check=False
    ).stdout.split()
    assert found == [str(pid)]


def test_the_daemon_keeps_its_environment_readable(home: Path) -> None:
    """The title does not overwrite /proc/PID/environ, where the test run's marker is found
    (tests/leftovers.py): a daemon a test leaves behind is caught."""
    pid = daemon.status(daemon.Address(str(home), None))["pid"]
    token = os.environ[leftovers.RUN_MARKER]
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert f"{leftovers.RUN_MARKER}={token}".encode() in environ
    found = [p for p in leftovers.find(token, os.getpid()) if p.pid == pid]
    assert [p.kind for p in found] == ["cursorops daemon"]


def test_a_socket_folder_others_can_enter_is_not_trusted(tmp_path: Path) -> None:
    folder = tmp_path / "sockets"
    folder.mkdir(mode=0o700)
    assert launcher.folder_is_private(folder)
    folder.chmod(0o755)
    assert not launcher.folder_is_private(folder)
    link = tmp_path / "link"
    link.symlink_to(folder)
    folder.chmod(0o700)
    assert not launcher.folder_is_private(link)
    assert not launcher.folder_is_private(tmp_path / "missing")


def test_global_options_are_found_before_the_command() -> None:
    env = {"CURSOROPS_HOME": "/env/home"}
    assert launcher.global_options(["topics", "stats", "--home", "x"], env) == (
        "/env/home",
        None,
        "topics",
    )
    assert launcher.global_options(["--home", "/a", "-o", "json", "daemon"], env) == (
        "/a",
        None,
        "daemon",
    )
    assert launcher.global_options(["--home=/b", "--metadata-url=pg://x", "topics"], {}) == (
        "/b",
        "pg://x",
        "topics",
    )
    assert launcher.global_options([], {}) == (launcher.DEFAULT_HOME, None, None)


def test_idle_timeout_stops_the_daemon_and_stop_is_idempotent(tmp_path: Path) -> None:
    root = tmp_path / "home"
    started = cursorops(root, "-o", "json", "daemon", "start", "--idle-timeout", "1s")
    assert started.returncode == 0, started.stderr
    address = daemon.Address(str(root), None)
    deadline = time.monotonic() + 30
    while daemon.status(address)["running"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert not Path(json.loads(started.stdout)["socket"]).exists()
    stopped = cursorops(root, "-o", "json", "daemon", "stop")
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["stopped"] is False


def test_bad_idle_timeout_is_refused_and_starts_nothing(tmp_path: Path) -> None:
    root = tmp_path / "home"
    done = cursorops(root, "daemon", "start", "--idle-timeout", "soon")
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
    assert not daemon.status(daemon.Address(str(root), None))["running"]


@pytest.mark.parametrize("metadata_url", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_the_daemon_serves_a_postgresql_store(metadata_url: str, tmp_path: Path) -> None:
    root = tmp_path / "home"
    make_topic(Config.from_home(root, metadata_url=metadata_url))
    started = cursorops(root, "daemon", "start", "--idle-timeout", "10m", metadata_url=metadata_url)
    assert started.returncode == 0, started.stderr
    try:
        before = taken(root, metadata_url)
        args = (
            "-o",
            "json",
            "topics",
            "skip-messages",
            TOPIC,
            "-s",
            "sub",
            "--messageId-triplet",
            "1:0",
        )
        warm = cursorops(root, *args, metadata_url=metadata_url)
        assert warm.returncode == 0, warm.stderr
        assert taken(root, metadata_url) == before + 1
        stats = in_process(root, "-o", "json", "topics", "stats", TOPIC, metadata_url=metadata_url)
        assert json.loads(stats.stdout)["subscriptions"]["sub"]["msgBacklog"] == MESSAGES - 1
    finally:
        cursorops(root, "daemon", "stop", metadata_url=metadata_url)


def test_a_long_command_does_not_hold_the_daemon_lock(tmp_path: Path) -> None:
    """Stop the daemon while its worker runs: a new daemon starts at once; the command goes on."""
    root = tmp_path / "home"
    make_topic(Config.from_home(root))
    assert cursorops(root, "daemon", "start").returncode == 0
    before = taken(root)
    environment = clean_environment()
    process = subprocess.Popen(
        [
            *(
                sys.executable,
                "-m",
                "cursorops.cli.launcher",
                "--home",
                str(root),
                "produce",
                TOPIC,
            ),
            *("-m", "x" * 100, "-n", "1000000", "--batch-size", "1"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=REPO,
    )
    try:
        deadline = time.monotonic() + 30
        while taken(root) == before:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.02)
        stopped = cursorops(root, "-o", "json", "daemon", "stop")
        assert json.loads(stopped.stdout)["stopped"] is True
        started = cursorops(root, "-o", "json", "daemon", "start")
        assert started.returncode == 0, started.stderr
        assert json.loads(started.stdout)["started"] is True
        assert process.poll() is None, "the command ended before the check could see it running"
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
        cursorops(root, "daemon", "stop")
    assert process.returncode == 130


def test_files_a_command_creates_get_the_callers_umask(home: Path, tmp_path: Path) -> None:
    """A new topic's ledger files are created by the worker with the caller's umask."""
    created = {}
    for via, run in (("daemon", cursorops), ("in-process", in_process)):
        topic = f"persistent://warm/ns/umask-{via}"
        assert run(home, "topics", "create", topic).returncode == 0
        before = taken(home)
        done = subprocess.run(
            [
                "sh",
                "-c",
                'umask 077 && exec "$@"',
                "sh",
                *(sys.executable, "-m", "cursorops.cli.launcher", "--home", str(home)),
                *("produce", topic, "-m", "x"),
            ],
            capture_output=True,
            text=True,
            env=clean_environment({"CURSOROPS_DAEMON": "off"} if via == "in-process" else {}),
            cwd=REPO,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert taken(home) == before + (1 if via == "daemon" else 0)
        files = [p for p in (home / "ledgers").rglob("*.parquet") if f"umask-{via}" in str(p)]
        assert files
        created[via] = {oct(p.stat().st_mode & 0o777) for p in files}
    assert created["daemon"] == created["in-process"] == {"0o600"}
