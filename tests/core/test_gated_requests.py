"""``Broker.request``: one call per gated operation, decided once.

On a namespace without approval the operation is applied at once, with its audit
record (``Applied``). On one that requires approval it is planned once, stored as a
verified plan record bound to a new run of its workflow, recorded as planned, and the
run is started with only the record's digest (``Pending``): no cursor moves. Bad
arguments are refused with a core error before anything is stored or started.
Real stores, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    InvalidInputError,
    NotAuthorizedError,
    StoreError,
    SubscriptionNotFoundError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import (
    Applied,
    Caller,
    ClearBacklog,
    GatedArguments,
    Pending,
    RedriveDeadLetters,
    ResetCursor,
    Run,
    SkipHead,
    SkipMatching,
    SkipMessages,
    UndoSkip,
    Unsubscribe,
    named,
)
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating.registry import topics_of
from cursorops.core.services.producer import OutgoingMessage
from tests.core.test_authz import dump

ORDINARY = "persistent://acme/ops/orders"
VAULT = "persistent://acme/vault/ledger"
SUB = "s"
ALICE = Caller("alice", "alice", via="rest")


@dataclass
class Runs:
    """The door's run starter: records what it was asked to start."""

    started: list[tuple[Run, str, str]] = field(default_factory=list)
    fail: bool = False
    may_start: bool = True
    asked: list[tuple[str, str]] = field(default_factory=list)

    def authorize(self, workflow: str, requester: str) -> None:
        self.asked.append((workflow, requester))
        if not self.may_start:
            raise NotAuthorizedError(f"{requester} may not start {workflow}")

    def start(self, run: Run, digest: str, requester: str) -> Run:
        if self.fail:
            raise StoreError("the workflow system did not answer")
        self.started.append((run, digest, requester))
        return Run(run.dag_id, run.run_id, f"http://127.0.0.1/runs/{run.run_id}")


@pytest.fixture
def seeded(broker: Broker) -> Broker:
    """Two namespaces, ``acme/ops`` and ``acme/vault`` (approval required), each with a topic
    of 10 messages (in batches of 2) and a Shared subscription at earliest, and a dead-letter
    topic of 3 messages; alice may produce and consume on both."""
    broker.admin.create_namespace("admin", "acme/vault")
    for namespace, topic in (("acme/ops", ORDINARY), ("acme/vault", VAULT)):
        broker.admin.grant_permission("admin", namespace, "alice", ["produce", "consume"])
        broker.admin.create_topic("admin", topic)
        broker.admin.create_subscription(
            "admin", topic, SUB, SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", topic, [OutgoingMessage(b"m%d" % i) for i in range(10)], batch_size=2
        )
        broker.admin.create_topic("admin", f"{topic}-{SUB}-DLQ")
        broker.producing.produce(
            "admin", f"{topic}-{SUB}-DLQ", [OutgoingMessage(b"dead", key="k") for _ in range(3)]
        )
    broker.admin.set_namespace_policy("admin", "acme/vault", skip_requires_approval=True)
    return broker


def ids(broker: Broker, topic: str) -> list[MessageId]:
    return [m.message_id for m in broker.reading.peek_messages("admin", topic, SUB, 100)]


def backlog(broker: Broker, topic: str) -> int:
    return len(broker.reading.peek_messages("admin", topic, SUB, 1000))


WHY = {"reason": "poison pill", "ticket": "OPS-1"}
REQUESTS: dict[str, Callable[[Broker, str], GatedArguments]] = {
    "skip-messages": lambda b, t: SkipMessages(
        topic=t, subscription=SUB, ids=tuple(ids(b, t)[:3]), **WHY
    ),
    "skip-matching": lambda b, t: SkipMatching(
        topic=t,
        subscription=SUB,
        predicate={"payloadContains": "m1"},
        matches=tuple(ids(b, t)[1:2]),
        **WHY,
    ),
    "skip-head": lambda b, t: SkipHead(topic=t, subscription=SUB, messages=4, **WHY),
    "clear-backlog": lambda b, t: ClearBacklog(topic=t, subscription=SUB, **WHY),
    "reset-cursor": lambda b, t: ResetCursor(
        topic=t, subscription=SUB, position=ids(b, t)[6].position, **WHY
    ),
    "unsubscribe": lambda b, t: Unsubscribe(topic=t, subscription=SUB, **WHY),
    "redrive": lambda b, t: RedriveDeadLetters(topic=t, subscription=SUB, **WHY),
}
"""Each operation's request on a topic (the undo of a skip needs a skip first)."""
CHANGED = {
    "skip-messages": 3,
    "skip-matching": 1,
    "skip-head": 2,
    "clear-backlog": 5,
    "reset-cursor": 6,
    "unsubscribe": None,
    "redrive": 3,
}
"""What each changes at once on the seeded topic (a skip counts its ids: the head's are whole
batches of 2)."""


@pytest.mark.parametrize("operation", sorted(REQUESTS))
def test_an_ordinary_namespace_applies_at_once_with_its_audit_record(
    seeded: Broker, operation: str
) -> None:
    runs = Runs()
    applied = seeded.request(operation, ALICE, REQUESTS[operation](seeded, ORDINARY), runs)
    assert isinstance(applied, Applied)
    assert (applied.operation, applied.changed) == (
        named(operation).recorded_as,
        CHANGED[operation],
    )
    [audit] = seeded.workflow.audit_log("admin", ORDINARY, kind=applied.operation)
    assert audit.detail["via"] == "rest" and audit.role == "alice"
    assert runs.started == [] and seeded.workflow.waiting_plan_records("admin", ORDINARY) == []


def test_an_undo_on_an_ordinary_namespace_applies_at_once(seeded: Broker) -> None:
    skipped = seeded.request(
        "skip-messages", ALICE, REQUESTS["skip-messages"](seeded, ORDINARY), Runs()
    )
    assert isinstance(skipped, Applied) and backlog(seeded, ORDINARY) == 7
    undo = UndoSkip(topic=ORDINARY, subscription=SUB, skip_id=skipped.outcome["skipId"])
    undone = seeded.request("undo-skip", ALICE, undo, Runs())
    assert isinstance(undone, Applied) and (undone.changed, undone.unchanged) == (3, 0)
    assert backlog(seeded, ORDINARY) == 10


@pytest.mark.parametrize("operation", sorted(REQUESTS))
def test_an_approval_namespace_stores_one_verified_record_and_starts_its_run(
    seeded: Broker, operation: str
) -> None:
    runs = Runs()
    before = backlog(seeded, VAULT)
    entry = named(operation)
    pending = seeded.request(operation, ALICE, REQUESTS[operation](seeded, VAULT), runs)
    assert isinstance(pending, Pending)
    record = pending.record
    assert record.verified() is record
    assert record.operation == entry.recorded_as and record.topic == VAULT
    assert (record.binding.requester, record.binding.role) == ("alice", "alice")
    assert record.document["reason"] == "poison pill" and record.document["ticket"] == "OPS-1"
    # The run: of the operation's workflow, chosen before the record bound it, started once
    # with the digest and as the requester.
    [(run, digest, requester)] = runs.started
    assert (run.dag_id, run.run_id) == (record.binding.dag_id, record.binding.run_id)
    assert run.dag_id == entry.workflow and (digest, requester) == (record.digest, "alice")
    assert pending.run.url == f"http://127.0.0.1/runs/{run.run_id}"
    # Stored once, recorded as planned, nothing moved.
    assert seeded.workflow.current_plan_record("admin", run.dag_id, run.run_id) == record
    assert seeded.workflow.waiting_plan_records("admin", VAULT) == [record]
    [planned] = seeded.workflow.audit_log("admin", VAULT, kind=f"{entry.recorded_as}-planned")
    assert planned.detail["planDigest"] == record.digest
    assert [
        r.planned.detail["planDigest"] for r in seeded.workflow.open_requests("admin", VAULT)
    ] == [record.digest]
    assert backlog(seeded, VAULT) == before
    assert SUB in {s.name for s in seeded.admin.list_subscriptions("admin", VAULT)}


def test_a_pending_request_is_applied_once_approved(seeded: Broker) -> None:
    pending = seeded.request(
        "skip-messages", ALICE, REQUESTS["skip-messages"](seeded, VAULT), Runs()
    )
    assert isinstance(pending, Pending)
    applied = seeded.apply_approved_plan(pending.record, [{"approver": "bob"}])
    assert (applied.operation, applied.changed) == ("skip", 3)
    assert backlog(seeded, VAULT) == 7
    [skip] = seeded.workflow.audit_log("admin", VAULT, kind="skip")
    assert skip.detail["planDigest"] == pending.record.digest
    assert skip.detail["approvedBy"] == ["bob"]


def test_an_undo_on_an_approval_namespace_waits(seeded: Broker) -> None:
    pending = seeded.request(
        "skip-messages", ALICE, REQUESTS["skip-messages"](seeded, VAULT), Runs()
    )
    assert isinstance(pending, Pending)
    seeded.apply_approved_plan(pending.record, [{"approver": "bob"}])
    [skip] = seeded.workflow.audit_log("admin", VAULT, kind="skip")
    runs = Runs()
    undo = UndoSkip(topic=VAULT, subscription=SUB, skip_id=skip.id, reason="wrong ids")
    waiting = seeded.request("undo-skip", ALICE, undo, runs)
    assert isinstance(waiting, Pending) and waiting.record.operation == "undo-skip"
    assert waiting.record.messages == 3 and len(runs.started) == 1
    assert backlog(seeded, VAULT) == 7


def test_a_redrive_from_an_approval_namespace_waits_and_is_recorded_on_both(
    seeded: Broker,
) -> None:
    """The dead-letter topic's namespace requires approval, the topic's does not: the
    stricter policy decides."""
    dlq = f"{VAULT}-{SUB}-DLQ"
    runs = Runs()
    arguments = RedriveDeadLetters(
        topic=ORDINARY, subscription=SUB, dead_letter_topic=dlq, reason="replay"
    )
    pending = seeded.request("redrive", ALICE, arguments, runs)
    assert isinstance(pending, Pending) and topics_of(pending.record) == (ORDINARY, dlq)
    for topic in (ORDINARY, dlq):
        [planned] = seeded.workflow.audit_log("admin", topic, kind="redrive-planned")
        assert planned.detail["planDigest"] == pending.record.digest
    assert backlog(seeded, ORDINARY) == 10


def _nothing_stored(
    broker: Broker, runs: Runs, call: Callable[[], object], error: type[Exception]
) -> str:
    before = dump(broker, broker.config)
    with pytest.raises(error) as info:
        call()
    assert dump(broker, broker.config) == before
    assert runs.started == []
    message = str(info.value)
    assert message and "\n" not in message
    return message


def test_bad_arguments_are_refused_before_anything_is_stored(seeded: Broker) -> None:
    runs = Runs()
    skip = SkipMessages(topic=VAULT, subscription=SUB, ids=tuple(ids(seeded, VAULT)[:3]))
    unknown = MessageId(999, 0)
    refusals: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
        "an unknown operation": (
            lambda: seeded.request("skip-everything", ALICE, skip, runs),
            InvalidArgumentError,
            "Unknown gated operation 'skip-everything'",
        ),
        "another operation's arguments": (
            lambda: seeded.request("skip-head", ALICE, skip, runs),
            InvalidArgumentError,
            "expected SkipHead, got SkipMessages",
        ),
        "an id the topic does not have": (
            lambda: seeded.request(
                "skip-messages",
                ALICE,
                SkipMessages(topic=VAULT, subscription=SUB, ids=(unknown,), reason="r"),
                runs,
            ),
            InvalidInputError,
            "999",
        ),
        "no reason where approval is required": (
            lambda: seeded.request(
                "skip-messages",
                ALICE,
                SkipMessages(topic=VAULT, subscription=SUB, ids=skip.ids, reason="  "),
                runs,
            ),
            InvalidArgumentError,
            "A reason is required",
        ),
        "a role without the permission": (
            lambda: seeded.request("skip-messages", Caller("mallory", "mallory"), skip, runs),
            NotAuthorizedError,
            "mallory",
        ),
        "a subscription the topic does not have": (
            lambda: seeded.request(
                "reset-cursor",
                ALICE,
                ResetCursor(topic=VAULT, subscription="nope", timestamp_ms=0, reason="r"),
                runs,
            ),
            SubscriptionNotFoundError,
            "nope",
        ),
    }
    for what, (call, error, said) in refusals.items():
        assert said in _nothing_stored(seeded, runs, call, error), what


@pytest.mark.parametrize(
    "make",
    [
        lambda: SkipMessages(topic=VAULT, subscription=SUB, ids=()),
        lambda: SkipMessages(topic=VAULT, subscription=SUB, ids=("1:2",)),  # type: ignore[arg-type]
        lambda: SkipMessages(topic="", subscription=SUB, ids=(MessageId(1, 0),)),
        lambda: SkipHead(topic=VAULT, subscription=SUB, messages=0),
        lambda: SkipHead(topic=VAULT, subscription=SUB, messages=True),
        lambda: SkipMatching(topic=VAULT, subscription=SUB, predicate={}, matches=()),
        lambda: ResetCursor(topic=VAULT, subscription=SUB),
        lambda: ResetCursor(topic=VAULT, subscription=SUB, position=Position(1, 0), timestamp_ms=5),
        lambda: ResetCursor(topic=VAULT, subscription=SUB, timestamp_ms=-1),
        lambda: Unsubscribe(topic=VAULT, subscription=" ", force=False),
        lambda: Unsubscribe(topic=VAULT, subscription=SUB, force="yes"),  # type: ignore[arg-type]
        lambda: UndoSkip(topic=VAULT, subscription=SUB, skip_id=0),
        lambda: RedriveDeadLetters(topic=VAULT, subscription=SUB, predicate="key=k"),  # type: ignore[arg-type]
        lambda: SkipHead(topic=VAULT, subscription=SUB, messages=1, ticket=5),  # type: ignore[arg-type]
        lambda: Caller("", "alice"),
        lambda: Caller("alice", ""),
    ],
)
def test_arguments_are_checked_when_made(make: Callable[[], object]) -> None:
    with pytest.raises(InvalidArgumentError):
        make()


def test_a_run_that_does_not_start_closes_its_request(seeded: Broker) -> None:
    """The record is stored and recorded as planned before the run starts: a run that never
    starts closes the request with a ``not-started`` record (nothing applied, nothing left
    waiting), and a run that starts after all with that record's digest is refused."""
    with pytest.raises(StoreError):
        seeded.request(
            "clear-backlog", ALICE, REQUESTS["clear-backlog"](seeded, VAULT), Runs(fail=True)
        )
    assert seeded.workflow.open_requests("admin", VAULT) == [] and backlog(seeded, VAULT) == 10
    [planned] = seeded.workflow.audit_log("admin", VAULT, kind="skip-planned")
    [closing] = seeded.workflow.audit_log("admin", VAULT, kind="skip-request")
    digest = planned.detail["planDigest"]
    assert (closing.detail["planDigest"], closing.detail["outcome"]) == (digest, "not-started")
    assert "the workflow system did not answer" in closing.detail["statement"]
    run = (planned.detail["dagId"], planned.detail["runId"])
    assert seeded.workflow.bound_plan_record("admin", digest, *run, "alice").digest == digest
    with pytest.raises(NotAuthorizedError, match="closed when its run did not start"):
        seeded.workflow.bound_plan_record("admin", digest, *run, "alice", started=True)


def test_a_requester_who_may_not_start_the_workflow_stores_nothing(seeded: Broker) -> None:
    runs = Runs(may_start=False)
    arguments = REQUESTS["skip-messages"](seeded, VAULT)
    message = _nothing_stored(
        seeded,
        runs,
        lambda: seeded.request("skip-messages", ALICE, arguments, runs),
        NotAuthorizedError,
    )
    assert "may not start cursorops_skip_messages" in message
    assert runs.asked == [("cursorops_skip_messages", "alice")]
    # On an ordinary namespace nothing asks the workflow system.
    applied = seeded.request(
        "skip-messages", ALICE, REQUESTS["skip-messages"](seeded, ORDINARY), runs
    )
    assert isinstance(applied, Applied) and len(runs.asked) == 1


def test_a_plan_record_serves_only_the_run_and_requester_it_is_bound_to(seeded: Broker) -> None:
    pending = seeded.request(
        "skip-messages", ALICE, REQUESTS["skip-messages"](seeded, VAULT), Runs()
    )
    assert isinstance(pending, Pending)
    digest, run = pending.record.digest, pending.run
    assert (
        seeded.workflow.bound_plan_record(
            "admin", digest, run.dag_id, run.run_id, "alice", started=True
        )
        == pending.record
    )
    refusals = {
        "another run": (digest, run.dag_id, "manual__by_hand", "alice", "not to this run"),
        "another workflow": (digest, "cursorops_skip_head", run.run_id, "alice", "not to this"),
        "another person": (digest, run.dag_id, run.run_id, "mallory", "not by this run's"),
        "no person": (digest, run.dag_id, run.run_id, None, "not by this run's"),
        "no such record": ("0" * 64, run.dag_id, run.run_id, "alice", "No plan record"),
    }
    for what, (named_digest, dag_id, run_id, requester, said) in refusals.items():
        with pytest.raises(NotAuthorizedError, match=said):
            seeded.workflow.bound_plan_record("admin", named_digest, dag_id, run_id, requester)
        assert what


def test_a_direct_door_still_refuses_on_an_approval_namespace(seeded: Broker) -> None:
    with pytest.raises(ApprovalRequiredError):
        skips.skip_messages(seeded.gated, "alice", VAULT, SUB, ids(seeded, VAULT)[:1])
