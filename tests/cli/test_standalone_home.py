"""One standalone per home, on its private socket: real processes, no mocks.

A background standalone is started by :func:`cursorops.cli.home.serving_socket`, stops on
``standalone stop``, on SIGTERM or when idle; a foreground one takes a home over from a
background one and refuses a home another foreground one serves; concurrent starts end
with one; on the socket the operating system's user is the authentication, on TCP never.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cursorops.cli import home as home_module
from cursorops.core.domain import admin_socket
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import StandaloneError
from cursorops.core.domain.header_text import header_value
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0
READY = re.compile(r"cursorops standalone ready: pulsar://\S+(?: admin (http://\S+))?")


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    env["PYTHONPATH"] = str(REPO)
    return env


def cli(home: Path, *args: str, timeout: float = WAIT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cursorops.cli.main", "--home", str(home), *args],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _status(home: Path) -> dict[str, object]:
    done = cli(home, "-o", "json", "standalone", "status")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert isinstance(document, dict)
    return document


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while not _gone(pid):
        assert time.monotonic() < deadline, f"pid {pid} still runs"
        time.sleep(0.05)


def _titled(home: Path) -> list[int]:
    """Live processes whose command line is ``cursorops standalone <home>``."""
    title = f"cursorops standalone {home}"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or _gone(int(entry.name)):
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if command == title:
            found.append(int(entry.name))
    return found


def _request(
    url_or_socket: str | Path, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """One HTTP request over TCP (a URL) or the home's socket (a Path)."""
    if isinstance(url_or_socket, Path):
        lines = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        lines += ["Content-Length: 0", "", ""]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30)
            conn.connect(str(url_or_socket))
            conn.sendall("\r\n".join(lines).encode())
            raw = b""
            while chunk := conn.recv(65536):
                raw += chunk
        head, _, body = raw.partition(b"\r\n\r\n")
        return int(head.split(b" ")[1]), body.decode(errors="replace")
    request = urllib.request.Request(
        url_or_socket + path,
        method=method,
        headers=headers or {},
        data=b"" if method == "POST" else None,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Foreground:
    """A foreground ``cursorops standalone`` on free ports, stopped with SIGINT."""

    def __init__(self, home: Path, *flags: str) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cursorops.cli.main",
                "--home",
                str(home),
                "standalone",
                "--broker-port",
                "0",
                "--web-port",
                "0",
                *flags,
            ],
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.ready = threading.Event()
        self.web_url = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            match = READY.search(line)
            if match:
                self.web_url = match.group(1) or ""
                self.ready.set()

    def wait_ready(self) -> Foreground:
        deadline = time.monotonic() + WAIT_S
        while not self.ready.wait(0.05):
            assert self.process.poll() is None, "".join(self.lines)
            assert time.monotonic() < deadline, "".join(self.lines)
        return self

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A home whose standalone, whatever kind, is stopped afterwards."""
    path = tmp_path / "home"
    yield path
    home_module.stop(str(path), None)


def _no_trace(home: Path) -> None:
    sock = home_module.socket_path(str(home), None)
    assert not sock.exists()
    assert not home_module.lock_path(sock).exists()


def test_a_command_starts_one_background_standalone_that_stop_ends(home: Path) -> None:
    told: list[str] = []
    sock = home_module.serving_socket(str(home), None, notice=told.append)
    assert len(told) == 1 and told[0].startswith("Starting a cursorops standalone for ")
    assert sock == home_module.socket_path(str(home), None)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o700
    status = _status(home)
    assert status["running"] is True and status["background"] is True
    assert status["home"] == str(home.resolve()) and status["socket"] == str(sock)
    pid = status["pid"]
    assert isinstance(pid, int)
    assert _titled(home) == [pid]
    # A second call finds it: no second process.
    assert home_module.serving_socket(str(home), None, notice=told.append) == sock
    assert _titled(home) == [pid] and len(told) == 1
    # A fresh home has what a foreground standalone would give it: public/default.
    code, body = _request(sock, "GET", "/admin/v2/tenants")
    assert code == 200 and json.loads(body) == ["public"]
    code, body = _request(sock, "GET", "/admin/v2/namespaces/public")
    assert code == 200 and json.loads(body) == ["public/default"]
    assert _status(home)["served"] == 2
    text = cli(home, "standalone", "status")
    assert f"pid:            {pid}" in text.stdout and "background" in text.stdout

    stopped = cli(home, "-o", "json", "standalone", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"stopped": True, "pid": pid, "socket": str(sock)}
    _wait_gone(pid)
    _no_trace(home)
    assert _status(home) == {"running": False, "socket": str(sock)}
    again = cli(home, "standalone", "stop")
    assert again.returncode == 0 and again.stdout == f"No cursorops standalone serves {home}\n"


def test_without_start_no_standalone_is_an_error(home: Path) -> None:
    with pytest.raises(StandaloneError, match="no cursorops standalone serves"):
        home_module.serving_socket(str(home), None, start=False)
    assert not home.exists()


def test_an_idle_background_standalone_stops_by_itself(home: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cursorops.cli.main",
            "--home",
            str(home),
            "standalone",
            "--background",
            "--idle-timeout",
            "1s",
        ],
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = process.communicate(timeout=WAIT_S)
    assert process.returncode == 0, output
    assert "idle for 1 s: stopping" in output
    _no_trace(home)


def test_idle_timeout_is_for_the_background(home: Path) -> None:
    done = cli(home, "standalone", "--idle-timeout", "1s")
    assert done.returncode == 2
    assert done.stderr == "error: --idle-timeout is for a --background standalone\n"


def test_concurrent_starts_end_with_one_standalone(home: Path) -> None:
    program = (
        "import sys; from cursorops.cli.home import serving_socket; "
        "print(serving_socket(sys.argv[1], None))"
    )
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", program, str(home)],
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    answers = [starter.communicate(timeout=WAIT_S) for starter in starters]
    sock = home_module.socket_path(str(home), None)
    assert [out for out, _ in answers] == [f"{sock}\n"] * 6, answers
    assert all(starter.returncode == 0 for starter in starters)
    status = _status(home)
    # The losers exit at once, and only the winner is left.
    deadline = time.monotonic() + WAIT_S
    while _titled(home) != [status["pid"]]:
        assert time.monotonic() < deadline, _titled(home)
        time.sleep(0.05)


def test_a_start_that_met_a_stopping_standalone_starts_another(home: Path) -> None:
    """The home's lock is held (here by this test, as by a standalone stopping on its idle
    timeout) when a command starts one: that one exits at once, and once the lock is let
    go without anyone serving the home, the command starts another."""
    home_module.private_folder()
    lock = home_module.lock_path(home_module.socket_path(str(home), None))
    fd = home_module.take_lock(lock)
    assert fd is not None
    home_module.write_holder(fd, background=True)
    found: list[Path] = []
    starter = threading.Thread(
        target=lambda: found.append(home_module.serving_socket(str(home), None)), daemon=True
    )
    starter.start()
    log = home / home_module.LOG_NAME
    deadline = time.monotonic() + WAIT_S
    while not log.exists() or f"is served by pid {os.getpid()}" not in log.read_text():
        assert time.monotonic() < deadline and starter.is_alive()
        time.sleep(0.05)
    lock.unlink()
    os.close(fd)
    starter.join(WAIT_S)
    assert found == [home_module.socket_path(str(home), None)]
    status = _status(home)
    assert status["background"] is True and status["pid"] != os.getpid()


def test_sigterm_stops_a_background_standalone_cleanly(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A home named relative to the caller's folder (the standalone runs in "/").
    monkeypatch.chdir(home.parent)
    home_module.serving_socket(home.name, None)
    assert _status(home)["home"] == str(home.resolve())
    pid = _status(home)["pid"]
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGTERM)
    _wait_gone(pid)
    _no_trace(home)
    log = (home / "logs" / "standalone.log").read_text()
    assert "cursorops standalone stopping" in log


def test_a_foreground_standalone_takes_over_from_a_background_one(home: Path) -> None:
    home_module.serving_socket(str(home), None)
    background = _status(home)["pid"]
    assert isinstance(background, int)
    foreground = Foreground(home).wait_ready()
    try:
        _wait_gone(background)
        status = _status(home)
        assert status["pid"] == foreground.process.pid and status["background"] is False
        # A command finds the foreground standalone: nothing else is started.
        home_module.serving_socket(str(home), None)
        assert _titled(home) == []
        assert _status(home)["pid"] == foreground.process.pid

        second = cli(home, "standalone", "--broker-port", "0", "--web-port", "0")
        assert second.returncode == 4
        assert second.stderr == (
            f"error: cursorops standalone (pid {foreground.process.pid}) already serves "
            f"{home}: stop it first (cursorops standalone stop)\n"
        )
        assert _status(home)["pid"] == foreground.process.pid
        # `standalone stop` stops a foreground standalone too.
        stopped = cli(home, "standalone", "stop")
        assert stopped.stdout == f"Stopped cursorops standalone {foreground.process.pid}\n"
        assert foreground.process.wait(WAIT_S) == 0
    finally:
        foreground.stop()
    _no_trace(home)


def test_the_role_header_is_trusted_on_the_socket_only(home: Path) -> None:
    with Broker(Config.from_home(home)) as broker:
        broker.admin.create_tenant("admin", "acme", [])
    secret = "data:;base64," + base64.b64encode(os.urandom(32)).decode()
    foreground = Foreground(home, "--auth-token-secret", secret).wait_ready()
    try:
        sock = home_module.socket_path(str(home), None)
        as_admin = {admin_socket.ROLE_HEADER: "admin"}
        as_alice = {admin_socket.ROLE_HEADER: "alice"}
        # On the socket: the header's role, or the standalone's (admin) without one.
        assert _request(sock, "GET", "/admin/v2/namespaces/acme", as_admin)[0] == 200
        assert _request(sock, "GET", "/admin/v2/namespaces/acme")[0] == 200
        assert _request(sock, "GET", "/admin/v2/namespaces/acme", as_alice)[0] == 403
        # On TCP the header is nobody's credentials: no token, no role.
        web = foreground.web_url
        assert _request(web, "GET", "/admin/v2/namespaces/acme", as_admin)[0] == 401
        # Nor are the socket's own paths served there.
        assert _request(web, "GET", admin_socket.STATUS_PATH)[0] == 404
        assert _request(web, "POST", admin_socket.STOP_PATH)[0] == 404
        assert foreground.process.poll() is None
        # Any script, as an RFC 8187 value; a value that is no role name is refused.
        spelled = {admin_socket.ROLE_HEADER: header_value("admin")}
        assert _request(sock, "GET", "/admin/v2/namespaces/acme", spelled)[0] == 200
        assert (
            _request(
                sock,
                "GET",
                "/admin/v2/namespaces/acme",
                {admin_socket.ROLE_HEADER: header_value("ålice")},
            )[0]
            == 403
        )
        for bad in (" ", "UTF-8''%FF", header_value("a\x01b")):
            code, body = _request(
                sock, "GET", "/admin/v2/namespaces/acme", {admin_socket.ROLE_HEADER: bad}
            )
            assert code == 401, (bad, body)
    finally:
        assert foreground.stop(signal.SIGTERM) == 0
    _no_trace(home)


def test_gated_requests_on_the_socket_are_the_cli_s(home: Path) -> None:
    topic = "persistent://public/default/gated"
    vault = "persistent://public/vault/gated"
    with Broker(Config.from_home(home)) as broker:
        broker.admin.create_tenant("admin", "public", [])
        for namespace in ("public/default", "public/vault"):
            broker.admin.create_namespace("admin", namespace)
        broker.admin.set_namespace_policy("admin", "public/vault", skip_requires_approval=True)
        for name in (topic, vault):
            broker.admin.create_topic("admin", name)
            broker.admin.create_subscription("admin", name, "sub", initial_position="earliest")
            broker.producing.produce("admin", name, [OutgoingMessage(b"a"), OutgoingMessage(b"b")])
    sock = home_module.serving_socket(str(home), None)
    code, body = _request(
        sock, "POST", "/admin/v2/persistent/public/default/gated/subscription/sub/skip/1"
    )
    assert code == 204, body
    code, body = _request(sock, "GET", "/admin/v2/persistent/public/default/gated/auditLog")
    assert code == 200
    skips = [record for record in json.loads(body) if record["kind"] == "skip"]
    assert [record["detail"]["via"] for record in skips] == ["cli"]
    # No workflow system named in its environment: approval cannot be asked here.
    code, body = _request(
        sock, "POST", "/admin/v2/persistent/public/vault/gated/subscription/sub/skip/1?reason=r"
    )
    assert code == 403, body
    assert "second person's approval" in body and "--admin-url" in body
    with Broker(Config.from_home(home)) as broker:
        assert [r for r in broker.workflow.audit_log("admin", vault) if r.kind == "skip"] == []


def test_a_background_standalone_that_dies_starting_is_reported(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(StandaloneError, match="exited with status") as caught:
        home_module.serving_socket(str(home), "nosuchdialect://nowhere")
    assert "nosuchdialect" in str(caught.value)
    assert not home_module.socket_path(str(home), "nosuchdialect://nowhere").exists()


def test_a_socket_folder_others_may_enter_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "sockets"
    folder.mkdir(mode=0o700)
    assert home_module.folder_problem(folder) is None
    folder.chmod(0o750)
    assert "mode 750" in str(home_module.folder_problem(folder))
    sock = folder / "x.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(sock))
        listener.listen(1)
        # Something listens, but in a folder others may enter: not this user's standalone.
        assert not home_module.answers(sock)
        assert home_module.ask(sock, "GET", admin_socket.STATUS_PATH) is None
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert "is not a folder" in str(home_module.folder_problem(link))


@pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to act as another user",
)
def test_a_socket_folder_of_another_user_is_refused() -> None:
    """As the user ``nobody``, whose socket folder root made first."""
    nobody = 65534
    folder = Path(f"/tmp/cursorops-{nobody}")
    if folder.exists():
        pytest.skip(f"{folder} exists already")
    folder.mkdir(mode=0o700)
    outer = Path(tempfile.mkdtemp())
    try:
        outer.chmod(0o755)
        home = outer / "home"
        home.mkdir()
        os.chown(home, nobody, nobody)
        done = subprocess.run(
            [
                "setpriv",
                f"--reuid={nobody}",
                f"--regid={nobody}",
                "--clear-groups",
                sys.executable,
                "-m",
                "cursorops.cli.main",
                "--home",
                str(home),
                "standalone",
                "--background",
            ],
            env={**_environment(), "HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )
        assert done.returncode == 6, done.stderr
        assert done.stderr == (
            f"error: refusing the socket folder: {folder} belongs to uid 0, not to this "
            f"user ({nobody})\n"
        )
        assert list(folder.iterdir()) == []
    finally:
        shutil.rmtree(folder)
        shutil.rmtree(outer)
