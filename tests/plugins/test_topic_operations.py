"""The topic commands as the CLI runs them: each sends its declared operation's request
to the REST app (here in-process, with a test door: the caller's Pulsar role in a
header) and prints the answer. Pulsar's paths answer as Pulsar does; the commands print
the lines and JSON documents they always have; a refused request changes nothing."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request
from fastapi.testclient import TestClient

from cursorops.cli import main as cli
from cursorops.cli.transport import Answer
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import Run, RunStarter
from cursorops.core.services.producer import OutgoingMessage
from cursorops.rest.app import create_app
from cursorops.rest.deps import Principal

TOPIC = "persistent://acme/ops/orders"
PARTS = "persistent://acme/ops/events"
BASE = "/admin/v2/persistent/acme/ops"


def _who(request: Request) -> Principal:
    role = request.headers.get("x-role", "admin")
    return Principal(role, role)


class _NoRuns:
    """No namespace of these tests requires approval."""

    def authorize(self, workflow: str, requester: str) -> None:
        raise AssertionError(f"{workflow} asked for by {requester}")

    def start(self, run: Run, digest: str, requester: str) -> Run:
        raise AssertionError("authorize refuses every run")


def _no_runs(request: Request) -> RunStarter:
    return _NoRuns()


class _AppTransport:
    """The CLI's transport, answered by the app in-process as ``role``."""

    where = "the app in-process"

    def __init__(self, client: TestClient, role: str) -> None:
        self.client = client
        self.role = role
        self.sent: list[tuple[str, str, object]] = []

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        self.sent.append((method, path, body))
        extra: dict[str, Any] = {} if body is None else {"content": json.dumps(body)}
        answer = self.client.request(
            method,
            path,
            params=dict(query or {}),
            headers={**(headers or {}), "x-role": self.role, "Content-Type": "application/json"},
            **extra,
        )
        return Answer(answer.status_code, answer.content, dict(answer.headers))


class Cli:
    def __init__(self, client: TestClient, broker: Broker, monkeypatch: pytest.MonkeyPatch):
        self.client = client
        self.broker = broker
        self.transport = _AppTransport(client, "admin")

        def transport(ctx: cli.Context, args: argparse.Namespace) -> _AppTransport:
            self.transport.role = ctx.role
            return self.transport

        monkeypatch.setattr(cli, "_transport", transport)

    def run(self, *argv: str, role: str = "admin") -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["--role", role, *argv])
        return code, out.getvalue(), err.getvalue()

    def lines(self, *argv: str, role: str = "admin") -> list[str]:
        code, out, err = self.run(*argv, role=role)
        assert code == 0, err
        return out.splitlines()

    def document(self, *argv: str) -> Any:
        code, out, err = self.run("-o", "json", *argv)
        assert code == 0, err
        return json.loads(out)

    def state(self) -> object:
        b = self.broker
        return [
            (t.name, t.partitions, [(s.name, s.type, dict(s.properties)) for s in subs])
            for t in b.admin.list_topics("admin", "acme/ops")
            for subs in [b.admin.list_subscriptions("admin", t.name)]
        ]

    def refused(self, code: int, *argv: str, role: str = "admin") -> str:
        before = self.state()
        got, out, err = self.run(*argv, role=role)
        assert (got, out) == (code, ""), err
        assert self.state() == before
        assert err.startswith("error: ") and err.count("\n") == 1
        return err


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    with Broker(Config.from_home(tmp_path / "home")) as broker:
        broker.admin.create_tenant("admin", "acme", ["acme-admin"])
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.grant_permission("admin", "acme/ops", "ops", ["consume", "produce"])
        with TestClient(create_app(_who, _no_runs, broker=broker)) as client:
            yield Cli(client, broker, monkeypatch)


def test_create_list_and_delete_topics(app: Cli) -> None:
    assert app.lines("topics", "create", "acme/ops/orders") == [f"Created topic {TOPIC}"]
    assert app.document("topics", "create-partitioned-topic", PARTS, "-p", "2") == {
        "topic": PARTS,
        "partitions": 2,
    }
    assert app.transport.sent[-1] == ("PUT", BASE + "/events/partitions", 2)
    assert app.lines("topics", "list", "acme/ops") == [PARTS, TOPIC]
    assert app.document("topics", "list", "acme/ops") == [
        {"topic": PARTS, "partitions": 2},
        {"topic": TOPIC, "partitions": 0},
    ]
    assert app.lines("topics", "list-partitioned-topics", "acme/ops") == [PARTS]
    # Pulsar's own list names each partition.
    assert app.client.get(BASE).json() == [f"{PARTS}-partition-0", f"{PARTS}-partition-1", TOPIC]
    assert app.document("topics", "get-partitioned-topic-metadata", PARTS) == {"partitions": 2}

    assert "already exists" in app.refused(4, "topics", "create", TOPIC)
    app.refused(2, "topics", "create-partitioned-topic", "acme/ops/x", "-p", "0")
    app.refused(2, "topics", "create-partitioned-topic", "acme/ops/x", "-p", "-3")
    app.refused(2, "topics", "create", "acme/ops/a b")
    app.refused(5, "topics", "create", "acme/ops/x", role="ops")
    app.refused(3, "topics", "create", "acme/nosuch/x")
    app.refused(2, "topics", "list", "acme")
    app.refused(2, "topics", "list", "acme/ops/orders")
    app.refused(3, "topics", "list", "acme/nosuch")
    assert "delete-partitioned-topic" in app.refused(2, "topics", "delete", PARTS)
    app.refused(2, "topics", "delete-partitioned-topic", TOPIC)
    app.refused(5, "topics", "delete", TOPIC, role="ops")

    assert app.lines("topics", "delete", TOPIC) == [f"Deleted topic {TOPIC}"]
    assert app.document("topics", "delete-partitioned-topic", PARTS, "-f") == {
        "topic": PARTS,
        "deleted": True,
    }
    assert app.transport.sent[-1] == ("DELETE", BASE + "/events/partitions", None)
    assert app.lines("topics", "list", "acme/ops") == []


def test_a_bare_number_creates_partitions_and_nothing_else_does(app: Cli) -> None:
    path = BASE + "/events/partitions"
    for body in ("3.5", '"3"', "true", "[3]", "{}"):
        answer = app.client.put(path, content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, body
    assert app.broker.admin.list_topics("admin", "acme/ops") == []
    assert app.client.put(path, json=3).status_code == 204
    assert app.client.put(BASE + "/plain").status_code == 204
    assert [t.partitions for t in app.broker.admin.list_topics("admin", "acme/ops")] == [3, 0]


def test_subscriptions_are_created_listed_changed_and_removed(app: Cli) -> None:
    app.broker.admin.create_topic("admin", TOPIC)
    app.broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(3)])
    created = app.lines(
        "topics", "create-subscription", TOPIC, "-s", "all", "--type", "shared", "-m", "earliest",
        "-p", "team=ops", "-p", "tier=1",
    )  # fmt: skip
    assert created == [f"Created Shared subscription all on {TOPIC} at earliest"]
    assert app.transport.sent[-1][2] == {
        "ledgerId": -1,
        "entryId": -1,
        "properties": {"team": "ops", "tier": "1"},
    }
    assert app.document("topics", "create-subscription", TOPIC, "-s", "new") == {
        "topic": TOPIC,
        "subscription": "new",
        "type": "Exclusive",
        "initialPosition": "latest",
        "properties": {},
    }
    second = app.broker.reading.peek_messages("admin", TOPIC, "all", 2)[1].message_id
    at = app.lines("topics", "create-subscription", TOPIC, "-s", "mid", "-m", second.client_text())
    assert at == [f"Created Exclusive subscription mid on {TOPIC} at {second.position}"]

    assert app.lines("topics", "subscriptions", TOPIC) == [
        "all  (Shared)",
        "mid  (Exclusive)",
        "new  (Exclusive)",
    ]
    assert app.document("topics", "subscriptions", TOPIC)[0] == {
        "subscription": "all",
        "type": "Shared",
        "properties": {"team": "ops", "tier": "1"},
    }
    assert app.client.get(BASE + "/orders/subscriptions").json() == ["all", "mid", "new"]

    assert app.lines(
        "topics", "update-subscription-properties", TOPIC, "-s", "all", "-p", "b=2"
    ) == [f"Subscription all of {TOPIC} now has properties: b=2"]
    assert app.transport.sent[-1] == (
        "PUT",
        BASE + "/orders/subscription/all/properties",
        {"b": "2"},
    )
    cleared = app.lines("topics", "update-subscription-properties", TOPIC, "-s", "all", "-c")
    assert cleared == [f"Subscription all of {TOPIC} now has properties: none"]

    assert app.lines("topics", "unsubscribe", TOPIC, "-s", "new", "--reason", "done") == [
        f"Deleted subscription new of {TOPIC}"
    ]
    assert app.document("topics", "unsubscribe", TOPIC, "-s", "mid") == {
        "topic": TOPIC,
        "subscription": "mid",
        "deleted": True,
    }
    assert app.lines("topics", "subscriptions", TOPIC) == ["all  (Shared)"]
    app.refused(3, "topics", "subscriptions", "acme/ops/nosuch")


def test_hostile_subscription_requests_change_nothing(app: Cli) -> None:
    app.broker.admin.create_topic("admin", TOPIC)
    app.broker.admin.create_topic("admin", PARTS, 2)
    app.broker.admin.create_subscription("admin", TOPIC, "s", SubscriptionType.SHARED)
    app.refused(4, "topics", "create-subscription", TOPIC, "-s", "s")
    app.refused(2, "topics", "create-subscription", TOPIC, "-s", "x", "--type", "Exclusivish")
    app.refused(2, "topics", "create-subscription", TOPIC, "-s", "x", "-m", "(1,0,-1,-1")
    app.refused(2, "topics", "create-subscription", TOPIC, "-s", "x", "-p", "novalue")
    app.refused(2, "topics", "create-subscription", PARTS, "-s", "x", "-m", "0:0")
    app.refused(2, "topics", "create-subscription", TOPIC, "-s", "x", "-m", "99:0")
    app.refused(5, "topics", "create-subscription", TOPIC, "-s", "x", role="nobody")
    app.refused(2, "topics", "update-subscription-properties", TOPIC, "-s", "s")
    app.refused(2, "topics", "update-subscription-properties", TOPIC, "-s", "s", "-p", "a=b", "-c")
    app.refused(3, "topics", "update-subscription-properties", TOPIC, "-s", "nosuch", "-c")
    app.refused(3, "topics", "unsubscribe", TOPIC, "-s", "nosuch")
    consumer = app.broker.reading.dispatcher("admin", TOPIC, "s").subscribe("worker")
    assert "use force" in app.refused(4, "topics", "unsubscribe", TOPIC, "-s", "s")
    assert app.lines("topics", "unsubscribe", TOPIC, "-s", "s", "-f") == [
        f"Deleted subscription s of {TOPIC}"
    ]
    del consumer

    path = BASE + "/orders/subscription/x"
    for body in (
        {"ledgerId": 1},
        {"ledgerId": 1.5, "entryId": 0},
        {"ledgerId": -2, "entryId": 0},
        {"ledgerId": -1, "entryId": -1, "batchIndex": 3},
        {"ledgerId": -1, "entryId": -1, "isExcluded": True},
    ):
        answer = app.client.put(path, json=body)
        assert answer.status_code == 400, body
    for query in ("replicated=true", "subscriptionType=Sharedish"):
        assert app.client.put(f"{path}?{query}").status_code == 400
    answer = app.client.put(BASE + "/orders/subscription/x/properties", json={"a": 1})
    assert answer.status_code in (400, 404)
    assert app.client.put(path, json={"properties": ["a"]}).status_code == 400
    assert app.broker.admin.list_subscriptions("admin", TOPIC) == []
    # What Pulsar's Java admin sends (its ResetCursorData) is taken.
    pulsar = {"ledgerId": -1, "entryId": -1, "partitionIndex": -1, "batchIndex": -1}
    answer = app.client.put(path, json={**pulsar, "isExcluded": False, "properties": {"a": "b"}})
    assert answer.status_code == 204
    assert [dict(s.properties) for s in app.broker.admin.list_subscriptions("admin", TOPIC)] == [
        {"a": "b"}
    ]


def test_stats_and_peek_print_what_they_printed(app: Cli) -> None:
    app.broker.admin.create_topic("admin", TOPIC)
    app.broker.admin.create_topic("admin", PARTS, 2)
    app.broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, {"team": "ops"}, initial_position="earliest"
    )
    app.broker.producing.produce(
        "admin",
        TOPIC,
        [OutgoingMessage(b"a", key="k", properties={"p": "1"}), OutgoingMessage(b"\xff")],
    )
    lines = app.lines("topics", "stats", TOPIC)
    assert lines[:4] == [
        f"topic:         {TOPIC}",
        "partitions:    0",
        "entries:       2",
        "messages:      2",
    ]
    assert "subscription s (Shared):" in lines and "  properties: team=ops" in lines
    assert "  msgBacklog (messages, exact): 2" in lines
    assert app.document("topics", "stats", TOPIC) == app.client.get(BASE + "/orders/stats").json()
    stats = app.document("topics", "partitioned-stats", PARTS)
    assert stats["metadata"] == {"partitions": 2} and stats["partitions"] == {}
    stats = app.document("topics", "partitioned-stats", PARTS, "--per-partition")
    assert sorted(stats["partitions"]) == [f"{PARTS}-partition-0", f"{PARTS}-partition-1"]
    app.refused(3, "topics", "partitioned-stats", TOPIC)
    app.refused(3, "topics", "stats", "acme/ops/nosuch")

    peeked = app.lines("topics", "peek-messages", TOPIC, "-s", "s", "-n", "5")
    assert len(peeked) == 2
    assert "key=k  properties=p=1  payload=a" in peeked[0]
    assert peeked[1].endswith("payload=base64:/w==")
    documents = app.document("topics", "peek-messages", TOPIC, "-s", "s")
    assert [d["payload"] for d in documents] == ["a"]
    app.refused(2, "topics", "peek-messages", TOPIC, "-s", "s", "-n", "0")
    app.refused(2, "topics", "peek-messages", TOPIC, "-s", "s", "-n", "100001")
    app.refused(3, "topics", "peek-messages", TOPIC, "-s", "nosuch")
