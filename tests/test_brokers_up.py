"""``scripts/brokers-up.sh``: several standalones on one store, as local processes.

Two brokers on the home's store (its SQLite file and ledger folder) serve one topic:
a producer on one and a consumer on the other meet, and a client given the
multi-host service URL the script prints reaches them. SIGTERM stops both and the
script exits 0; a broker that dies is reported and the other carries on serving, and
the script exits 1 once the last is gone; either way nothing of its process group is
left and the ports close.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pulsar
import pytest

from cursorops.airflow.local_airflow import default_sigint
from cursorops.local.ports import free_port, listening

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "brokers-up.sh"
READY = "cursorops brokers ready: "


@dataclass
class Brokers:
    process: subprocess.Popen[bytes]
    home: Path
    log: Path
    broker_port: int
    web_port: int

    def output(self) -> str:
        return self.log.read_text()

    def group(self) -> list[str]:
        """The command lines still running in the script's process group."""
        found = subprocess.run(
            ["ps", "-ww", "-o", "args=", "-g", str(self.process.pid)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return [line for line in found.splitlines() if line.strip()]

    def broker_pids(self) -> list[int]:
        found = subprocess.run(
            ["pgrep", "-g", str(self.process.pid), "-f", "cursorops standalone"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return sorted(int(pid) for pid in found.split())


def launch(home: Path, count: int, broker_port: int, web_port: int) -> Brokers:
    log = home.parent / f"{home.name}-brokers.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    env.update(
        CURSOROPS_HOME=str(home),
        CURSOROPS_BROKERS=str(count),
        CURSOROPS_BROKER_PORT=str(broker_port),
        CURSOROPS_WEB_PORT=str(web_port),
    )
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", str(SCRIPT)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=default_sigint,
        )
    return Brokers(process, home, log, broker_port, web_port)


OWNER_AGREES_S = 30
"""How long two brokers that just started may disagree on a topic's owner (a beat or so)."""


def wait_ready(brokers: Brokers) -> str:
    """The service URL the script printed once every broker answered."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for line in brokers.output().splitlines():
            if line.startswith(READY):
                return line.removeprefix(READY).split()[0]
        if brokers.process.poll() is not None:
            pytest.fail(f"brokers-up.sh exited {brokers.process.returncode}:\n{brokers.output()}")
        time.sleep(0.2)
    pytest.fail(f"brokers-up.sh never said ready:\n{brokers.output()}")


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Brokers]:
    brokers = launch(tmp_path / "home", 2, free_port(span=2), free_port(span=2))
    try:
        yield brokers
    finally:
        if brokers.process.poll() is None:
            os.killpg(brokers.process.pid, signal.SIGKILL)
            brokers.process.wait()


def test_two_brokers_share_the_store_and_stop_on_sigterm(two: Brokers) -> None:
    url = wait_ready(two)
    ports = [two.broker_port, two.broker_port + 1]
    webs = [two.web_port, two.web_port + 1]
    assert url == f"pulsar://127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}"
    assert (two.home / "brokers-url").read_text().strip() == url
    assert len(two.broker_pids()) == 2

    # Both answer, and name the same owner, one of the two, once each has seen the other
    # live: a broker learns of the brokers that joined after it at its next beat (every
    # 0.5 s; later on a loaded machine), so the first may still name itself for a moment.
    deadline = time.monotonic() + OWNER_AGREES_S
    while True:
        owners = set()
        for web in webs:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{web}/lookup/v2/topic/persistent/public/default/t",
                timeout=10,
            ) as answer:
                owners.add(json.load(answer)["brokerUrl"])
        if len(owners) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(owners) == 1, owners
    assert owners <= {f"pulsar://127.0.0.1:{port}" for port in ports}

    topic = "persistent://public/default/shared-by-two"
    first = pulsar.Client(f"pulsar://127.0.0.1:{ports[0]}")
    second = pulsar.Client(f"pulsar://127.0.0.1:{ports[1]}")
    either = pulsar.Client(url)
    try:
        consumer = second.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        first.create_producer(topic).send(b"from broker 1")
        either.create_producer(topic).send(b"from either")
        received = set()
        for _ in range(2):
            message = consumer.receive(30_000)
            consumer.acknowledge(message)
            received.add(message.data())
        assert received == {b"from broker 1", b"from either"}
    finally:
        for client in (first, second, either):
            client.close()

    os.killpg(two.process.pid, signal.SIGTERM)
    assert two.process.wait(timeout=120) == 0, two.output()
    assert two.output().splitlines()[-1] == "cursorops brokers stopped (2 of them)"
    assert two.group() == []
    for port in ports + webs:
        assert not listening(port), port


def test_a_broker_that_dies_leaves_the_other_serving(two: Brokers) -> None:
    url = wait_ready(two)
    victim, survivor = two.broker_pids()
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while "still serve" not in two.output():
        assert time.monotonic() < deadline, two.output()
        time.sleep(0.2)
    assert re.search(r"broker-[12] exited \(137\): 1 still serve", two.output())
    assert two.process.poll() is None
    # The survivor serves the whole service URL's clients.
    client = pulsar.Client(url, operation_timeout_seconds=60)
    try:
        topic = "persistent://public/default/after-a-death"
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        client.create_producer(topic).send(b"still here")
        assert consumer.receive(60_000).data() == b"still here"
    finally:
        client.close()
    os.kill(survivor, signal.SIGKILL)
    assert two.process.wait(timeout=120) == 1, two.output()
    assert "every broker exited" in two.output()
    assert two.group() == []


@pytest.mark.parametrize(
    "variable, value", [("CURSOROPS_BROKERS", "0"), ("CURSOROPS_BROKER_PORT", "66x")]
)
def test_a_bad_setting_is_refused_and_starts_nothing(
    tmp_path: Path, variable: str, value: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    env.update(CURSOROPS_HOME=str(tmp_path / "home"), **{variable: value})
    done = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert f"Invalid {variable} '{value}'" in done.stderr
    assert not list((tmp_path / "home").glob("broker-*"))
