"""pulsar-admin's day-one commands in real processes, text and JSON: ``--version``, listing
and deleting tenants, namespaces and topics, bare names from ``topics list``, topics created
on first use, and every message id form a Pulsar user holds. A refusal changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from cursorops import __version__
from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from tests.cli.test_cli import cursorops, ok, ok_json

pytestmark = pytest.mark.e2e

TOPIC = "persistent://acme/ops/orders"
EVENTS = "persistent://acme/ops/events"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    ok(home, "tenants", "create", "acme", "-r", "acme-admin")
    ok(home, "namespaces", "create", "acme/ops")
    ok(home, "topics", "create", TOPIC)
    ok(home, "topics", "create-partitioned-topic", EVENTS, "-p", "2")
    return home


def _everything(home: Path) -> object:
    """Tenants, namespaces, topics, subscriptions, backlogs and audit records, read from the
    home's stores in this process: what a refusal must leave."""
    with Broker(Config.from_home(home)) as broker:
        tenants = broker.admin.list_tenants("admin")
        namespaces = {t: broker.admin.list_namespaces("admin", t) for t in tenants}
        topics = [
            t.name
            for ns in namespaces.values()
            for n in ns
            for t in broker.admin.list_topics("admin", n)
        ]
        subs = {
            t: {
                name: stats["msgBacklog"]
                for name, stats in broker.analysis.topic_stats("admin", t)
                .to_pulsar_json()["subscriptions"]
                .items()
            }
            for t in topics
        }
        audit = {t: len(broker.metadata.audit_log(t)) for t in topics}
    return tenants, namespaces, topics, subs, audit


def _refused(home: Path, code: int, *args: str, role: str | None = None) -> str:
    before = _everything(home)
    run = cursorops(home, *args, role=role)
    assert run.code == code, (args, run.code, run.stderr)
    assert run.stdout == "" and run.stderr.startswith("error: ") and run.stderr.count("\n") == 1
    assert _everything(home) == before
    return run.stderr


def test_version_is_printed_as_pulsar_admin_does() -> None:
    run = cursorops(None, "--version")
    assert (run.code, run.stdout, run.stderr) == (0, f"cursorops {__version__}\n", "")


def test_topics_list_prints_bare_names_and_details_under_json(home: Path) -> None:
    assert ok(home, "topics", "list", "acme/ops").stdout == f"{EVENTS}\n{TOPIC}\n"
    assert ok_json(home, "topics", "list", "acme/ops") == [
        {"topic": EVENTS, "partitions": 2},
        {"topic": TOPIC, "partitions": 0},
    ]


def test_tenants_and_namespaces_are_listed_and_deleted_once_empty(home: Path) -> None:
    assert ok(home, "namespaces", "list", "acme").stdout == "acme/ops\n"
    assert ok_json(home, "namespaces", "list", "acme") == ["acme/ops"]
    said = _refused(home, 4, "tenants", "delete", "acme")
    assert "The tenant still has active namespaces: acme/ops" in said
    said = _refused(home, 4, "namespaces", "delete", "acme/ops")
    assert "Cannot delete non empty namespace acme/ops" in said
    _refused(home, 5, "namespaces", "delete", "acme/ops", role="ops")
    _refused(home, 5, "tenants", "delete", "acme", role="acme-admin")
    _refused(home, 2, "namespaces", "delete", "acme")
    _refused(home, 3, "tenants", "delete", "nosuch")

    assert ok(home, "topics", "delete", TOPIC).stdout == f"Deleted topic {TOPIC}\n"
    assert ok_json(home, "topics", "delete-partitioned-topic", EVENTS) == {
        "topic": EVENTS,
        "deleted": True,
    }
    assert ok(home, "topics", "list", "acme/ops").stdout == ""
    assert ok_json(home, "namespaces", "delete", "acme/ops", role="acme-admin") == {
        "namespace": "acme/ops",
        "deleted": True,
    }
    assert ok(home, "tenants", "delete", "acme").stdout == "Deleted tenant acme\n"
    assert ok_json(home, "tenants", "list") == ["public"]


def test_a_topic_delete_follows_pulsars_rules(home: Path) -> None:
    ok(home, "topics", "create-subscription", EVENTS, "-s", "billing", "--type", "Shared")
    said = _refused(home, 2, "topics", "delete", EVENTS)
    assert "delete-partitioned-topic" in said
    said = _refused(home, 2, "topics", "delete-partitioned-topic", TOPIC)
    assert "topics delete" in said
    _refused(home, 2, "topics", "delete", f"{EVENTS}-partition-0")
    _refused(home, 5, "topics", "delete-partitioned-topic", EVENTS, role="ops")
    run = ok(home, "topics", "delete-partitioned-topic", EVENTS, "-f")
    assert run.stdout == f"Deleted partitioned topic {EVENTS}\n"
    with Broker(Config.from_home(home)) as broker:
        kinds = sorted(r.kind for r in broker.metadata.audit_log(EVENTS))
    assert kinds == ["delete-topic", "unsubscribe"]


def test_an_approval_namespace_refuses_a_topic_delete_that_drops_a_backlog(home: Path) -> None:
    gated = "persistent://acme/gated/orders"
    ok(home, "namespaces", "create", "acme/gated")
    ok(home, "namespaces", "set-skip-approval", "acme/gated", "--enable")
    ok(home, "topics", "create-subscription", gated, "-s", "s", "--type", "Shared")
    ok(home, "produce", gated, "-m", "x")
    for flags in ((), ("-f",)):
        said = _refused(home, 5, "topics", "delete", gated, *flags)
        assert "cursorops_unsubscribe" in said and "nothing deleted" in said


def test_produce_and_create_subscription_create_a_missing_topic(home: Path) -> None:
    fresh = "persistent://acme/ops/fresh"
    ok(home, "produce", fresh, "-m", "hello")
    ok(home, "topics", "create-subscription", "acme/ops/other", "-s", "s")
    assert ok(home, "topics", "list", "acme/ops").stdout.split() == [
        EVENTS,
        fresh,
        TOPIC,
        "persistent://acme/ops/other",
    ]
    run = ok(home, "namespaces", "set-auto-topic-creation", "acme/ops", "--disable")
    assert "topics create only" in run.stdout
    missing = "persistent://acme/ops/missing"
    for args in (
        ("produce", missing, "-m", "x"),
        ("topics", "create-subscription", missing, "-s", "s"),
    ):
        said = _refused(home, 3, *args)
        assert f"cursorops topics create {missing}" in said
    _refused(home, 5, "namespaces", "set-auto-topic-creation", "acme/ops", "--enable", role="ops")
    assert ok_json(home, "namespaces", "set-auto-topic-creation", "acme/ops", "--enable") == {
        "namespace": "acme/ops",
        "allowAutoTopicCreation": True,
    }
    ok(home, "produce", missing, "-m", "x")


def test_every_id_form_is_taken_and_printed_back(home: Path) -> None:
    ok(
        home,
        "topics",
        "create-subscription",
        TOPIC,
        "-s",
        "s",
        "--type",
        "Shared",
        "-m",
        "earliest",
    )
    produced = ok_json(home, "produce", TOPIC, "-m", "a", "-m", "b", "-m", "c", "-m", "d")
    # Each id is printed in every form a command takes, the client's included.
    lines = ok(home, "produce", TOPIC, "-m", "e").stdout.split()
    assert lines[3].startswith("(") and lines[3].endswith(",-1,-1)")
    first, second, third, fourth = produced
    assert first["messageId"] == "({},{},-1,-1)".format(*first["triplet"].split(":"))
    forms = [
        first["messageId"],
        second["messageId"].replace(",", ", "),
        third["triplet"] + ":-1",
        fourth["base64"],
    ]
    skipped = ok_json(home, "topics", "skip-messages", TOPIC, "-s", "s", "--message-id", *forms)
    assert len(skipped["skipped"]) == 4
    assert {m["messageId"] for m in skipped["skipped"]} == {m["messageId"] for m in produced}
    # The client's form through the pulsar-admin option names too.
    ok(home, "topics", "skip-messages", TOPIC, "-s", "s", "--messageId-triplet", first["messageId"])
    # Reset and create-subscription take it for an entry.
    ok(home, "topics", "reset-cursor", TOPIC, "-s", "s", "-m", second["messageId"])
    run = ok(home, "topics", "create-subscription", TOPIC, "-s", "t", "-m", third["messageId"])
    assert run.stdout.endswith(f"at {third['triplet']}\n")


@pytest.mark.parametrize("bad", ["(1,0,7,-1)", "(\uff11,0,-1,-1)", "1:0:-5"])
def test_a_bad_id_is_one_error_line_and_changes_nothing(home: Path, bad: str) -> None:
    ok(
        home,
        "topics",
        "create-subscription",
        TOPIC,
        "-s",
        "s",
        "--type",
        "Shared",
        "-m",
        "earliest",
    )
    ok(home, "produce", TOPIC, "-m", "a")
    before = _everything(home)
    run = cursorops(home, "topics", "skip-messages", TOPIC, "-s", "s", "--message-id", bad)
    assert run.code == 2 and run.stdout == "" and run.stderr.count("\n") == 1, run.stderr
    assert "(ledgerId,entryId,partition,batchIndex)" in run.stderr or "partition 7" in run.stderr
    assert _everything(home) == before
