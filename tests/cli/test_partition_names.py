"""Partition names (``t-partition-N``) where pulsar-admin takes them: analyze-backlog,
reset-cursor, skip-messages and subscriptions act on that partition (or, for
subscriptions, its topic's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cursorops.cli.main import main
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/shop/parts"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with Broker(Config.from_home(tmp_path)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/shop")
        broker.admin.create_topic("admin", TOPIC, 2)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"m{i}".encode(), key=f"k{i}") for i in range(20)]
        )
    return tmp_path


def _json(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> object:
    assert main(["--home", str(home), "-o", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _backlog(home: Path) -> dict[str, int]:
    with Broker(Config.from_home(home)) as broker:
        rows = broker.analysis.analyze_backlog("admin", TOPIC, "s")
    return {row.topic_partition: row.result.messages for row in rows}


def test_partition_names_are_taken(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    part1 = f"{TOPIC}-partition-1"
    before = _backlog(home)
    analysis = _json(capsys, home, "topics", "analyze-backlog", part1, "-s", "s")
    assert isinstance(analysis, dict)
    assert analysis["total"]["messages"] == before[part1]
    assert [p["topicPartition"] for p in analysis["partitions"]] == [part1]

    subs = _json(capsys, home, "topics", "subscriptions", part1)
    assert [s["subscription"] for s in subs] == ["s"]  # type: ignore[union-attr,index]

    with Broker(Config.from_home(home)) as broker:
        first = broker.reading.peek_messages("admin", part1, "s", 1)[0].message_id
    _json(
        capsys,
        home,
        "topics",
        "skip-messages",
        part1,
        "-s",
        "s",
        "--messageId-triplet",
        f"{first.ledger_id}:{first.entry_id}",
    )
    after_skip = _backlog(home)
    assert after_skip[part1] == before[part1] - 1
    assert after_skip[f"{TOPIC}-partition-0"] == before[f"{TOPIC}-partition-0"]

    position = f"{first.ledger_id}:{first.entry_id}"
    _json(capsys, home, "topics", "reset-cursor", part1, "-s", "s", "--messageId", position)
    after_reset = _backlog(home)
    assert after_reset[part1] == before[part1]
    assert after_reset[f"{TOPIC}-partition-0"] == before[f"{TOPIC}-partition-0"]


def test_a_partition_refuses_ids_of_another(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Broker(Config.from_home(home)) as broker:
        other = broker.reading.peek_messages("admin", f"{TOPIC}-partition-0", "s", 1)[0].message_id
    code = main(
        [
            "--home",
            str(home),
            "topics",
            "skip-messages",
            f"{TOPIC}-partition-1",
            "-s",
            "s",
            "--messageId-triplet",
            f"{other.ledger_id}:{other.entry_id}",
        ]
    )
    assert code != 0
    assert "other partitions" in capsys.readouterr().err
