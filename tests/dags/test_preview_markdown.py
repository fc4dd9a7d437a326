"""The approver's Markdown: one layout for every operation, rendered from the record's
``Preview`` (checked through a real CommonMark renderer, as Airflow's page renders it).

Plan records of a real store (SQLite): the heading counts what changes, then the
request, the effect counted, per partition before and after, the details, the
messages; a stale request says so first."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.plans.plan_record import PlanRecord
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import (
    Caller,
    Pending,
    ResetCursor,
    SkipMatching,
    SkipMessages,
    UndoSkip,
)
from cursorops.core.services.gating.approval_text import STALE, preview_markdown, subject
from cursorops.core.services.producer import OutgoingMessage
from tests.dags.test_inert import RENDERER

TOPIC = "persistent://acme/vault/ledger"
SUB = "s"
ALICE = Caller("alice", "alice", via="rest")


class _Runs:
    def authorize(self, workflow: str, requester: str) -> None:
        return None

    def start(self, run: object, digest: str, requester: str) -> object:
        return run


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """acme/vault requires approval; its topic holds 10 messages (batches of 2) with a
    Shared subscription at earliest; alice may consume."""
    with Broker(Config.from_home(tmp_path / "home")) as b:
        b.admin.create_tenant("admin", "acme")
        b.admin.create_namespace("admin", "acme/vault")
        b.admin.grant_permission("admin", "acme/vault", "alice", ["produce", "consume"])
        b.admin.create_topic("admin", TOPIC)
        b.admin.create_subscription(
            "admin", TOPIC, SUB, SubscriptionType.SHARED, initial_position="earliest"
        )
        b.producing.produce(
            "admin",
            TOPIC,
            [OutgoingMessage(b"m%d" % i, key=f"k{i}") for i in range(10)],
            batch_size=2,
        )
        b.admin.set_namespace_policy("admin", "acme/vault", skip_requires_approval=True)
        yield b


def ids(broker: Broker) -> list[MessageId]:
    return [m.message_id for m in broker.reading.peek_messages("admin", TOPIC, SUB, 100)]


def ask(broker: Broker, operation: str, arguments: object) -> PlanRecord:
    made = broker.request(operation, ALICE, arguments, _Runs())  # type: ignore[arg-type]
    assert isinstance(made, Pending)
    return made.record


def text(markdown: str) -> str:
    """What a reader of the rendered page reads: the text, tags gone, one space per gap."""
    rendered = RENDERER.render(markdown)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", rendered))).strip()


def sections(markdown: str) -> list[str]:
    return re.findall(r"^\*\*([A-Z][a-z ]+)\*\*", markdown, flags=re.MULTILINE)


def test_every_operation_renders_the_same_sections_in_the_same_order(broker: Broker) -> None:
    first = ids(broker)[:3]
    skip = ask(
        broker, "skip-messages", SkipMessages(topic=TOPIC, subscription=SUB, ids=first, reason="r")
    )
    reset = ask(
        broker,
        "reset-cursor",
        ResetCursor(topic=TOPIC, subscription=SUB, timestamp_ms=0, reason="r"),
    )
    for record in (skip, reset):
        markdown = preview_markdown(record, content=False)
        order = sections(markdown)
        assert order[:3] == ["Effect", "Per partition", "Details"], order
        assert "| partition |" in markdown


def test_a_partly_acknowledged_rerun_reads_what_changes(broker: Broker) -> None:
    first = ids(broker)[:3]
    done = ask(
        broker,
        "skip-messages",
        SkipMessages(topic=TOPIC, subscription=SUB, ids=first[:2], reason="r"),
    )
    broker.apply_approved_plan(done, [{"approver": "bob"}])
    again = ask(
        broker, "skip-messages", SkipMessages(topic=TOPIC, subscription=SUB, ids=first, reason="r")
    )
    shown = text(preview_markdown(again, content=False))
    assert "Skip 1 message(s), 1 id(s); 2 already acknowledged on" in shown
    assert "To be acknowledged: 1 message(s)" in shown
    assert "Already acknowledged, left as is: 2 message(s)" in shown
    assert subject(again).startswith("Skip 1 message(s), 1 id(s); 2 already acknowledged on ")


def test_a_reset_back_reads_what_is_redelivered_per_partition(broker: Broker) -> None:
    first = ids(broker)
    skip = ask(
        broker,
        "skip-messages",
        SkipMessages(topic=TOPIC, subscription=SUB, ids=first[:4], reason="r"),
    )
    broker.apply_approved_plan(skip, [{"approver": "bob"}])
    start = first[0].position
    back = ResetCursor(
        topic=TOPIC, subscription=SUB, position=Position(start.ledger_id, 0), reason="again"
    )
    markdown = preview_markdown(ask(broker, "reset-cursor", back), content=False)
    shown = text(markdown)
    assert "Reset cursor: redeliver 4 message(s) on" in shown
    assert "To be redelivered: 4 message(s)" in shown and "To be acknowledged: 0" in shown
    assert "| partition | backlog | mark-delete → next read |" in markdown
    assert re.search(r"\| `[^`]+` \| 6 → 10 \| [0-9:]+ → [0-9:]+ \| 0 \| 4 \|", markdown)


def test_an_undo_never_reads_as_approved_before_it_is(broker: Broker) -> None:
    skip = ask(
        broker,
        "skip-messages",
        SkipMessages(topic=TOPIC, subscription=SUB, ids=ids(broker)[:3], reason="pill"),
    )
    broker.apply_approved_plan(skip, [{"approver": "bob"}])
    [audit] = broker.workflow.audit_log("admin", TOPIC, kind="skip")
    undo = ask(
        broker,
        "undo-skip",
        UndoSkip(topic=TOPIC, subscription=SUB, skip_id=audit.id, reason="oops"),
    )
    shown = text(preview_markdown(undo, content=False))
    assert "Approvals needed: 1 (distinct people, none the requester); none given yet" in shown
    assert "The skip it undoes was approved by: bob (from that skip's audit record)" in shown
    assert shown.lower().count("approved by") == 1
    assert "To be redelivered: 3 message(s)" in shown
    later = text(preview_markdown(undo, content=False, approved_by=["carol"]))
    assert "given so far by carol" in later


def test_everything_reads_as_everything(broker: Broker) -> None:
    matching = SkipMatching(
        topic=TOPIC,
        subscription=SUB,
        predicate={"publishTime": {"after": 0}},
        matches=tuple(ids(broker)[:1]),
        reason="r",
    )
    shown = text(preview_markdown(ask(broker, "skip-matching", matching), content=False))
    assert "Matching: everything" in shown and "publishTime" not in shown


def test_a_stale_request_says_so_first(broker: Broker) -> None:
    record = ask(
        broker,
        "skip-messages",
        SkipMessages(topic=TOPIC, subscription=SUB, ids=ids(broker)[:1], reason="r"),
    )
    markdown = preview_markdown(record, content=False, stale="The run was re-planned.")
    assert markdown.startswith(f"> **{STALE}** The run was re\\-planned\\.")
    assert "Approve is not offered" in text(markdown.splitlines()[0])


def test_content_is_masked_unless_the_reader_may_peek(broker: Broker) -> None:
    record = ask(
        broker,
        "skip-messages",
        SkipMessages(topic=TOPIC, subscription=SUB, ids=ids(broker)[:1], reason="r"),
    )
    assert "m0" in text(preview_markdown(record, content=True))
    masked = text(preview_markdown(record, content=False))
    assert "m0" not in masked and "2 bytes, masked" in masked
    assert "k0" not in masked and "Keys, properties and payloads are masked here" in masked
