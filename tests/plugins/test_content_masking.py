"""Message content (keys, properties, payloads) over REST, per caller: a produce-only role
and an Airflow user with no Pulsar grant never read it; a role that may peek does.

Real plan records (planned by the Broker as a workflow's planning task plans them), a
real applied redrive's audit records, read through Airflow's API app with each user's
token."""

from __future__ import annotations

import secrets

from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import (
    Caller,
    RedriveDeadLetters,
    Run,
    SkipMatching,
    SkipMessages,
)
from cursorops.core.services.producer import OutgoingMessage
from tests.plugins.conftest import Api, rest_path

KEY = "card-4111"
PROPERTY = ("pii", "yes")
PAYLOAD = b"secret-payload"
SECRETS = (KEY, "pii", "secret-payload")
"""Nothing of these may reach a reader who may not peek."""
SUB = "billing"
PEEKS = "alice"
"""A role with ``consume`` (hence peek) on the namespace."""
PRODUCES = "dave"
"""A role with ``produce`` only: it may read stats, plan records and audit records."""
VIEWER = "carol"
"""An Airflow viewer with no Pulsar grant."""


def _message(i: int) -> OutgoingMessage:
    return OutgoingMessage(PAYLOAD + b"-%d" % i, key=KEY, properties=dict([PROPERTY]))


def _seeded(api: Api) -> tuple[str, str, dict[str, tuple[str, str]]]:
    """A topic and its dead-letter topic, each holding content-rich messages; a skip, a
    skip by predicate and a redrive planned (their plan records), the redrive applied."""
    namespace = f"acme/masked-{secrets.token_hex(3)}"
    topic = f"persistent://{namespace}/cards"
    dlq = f"{topic}-{SUB}-DLQ"
    with Broker(api.config) as broker:
        broker.admin.create_namespace("admin", namespace)
        broker.admin.grant_permission("admin", namespace, PEEKS, ["consume"])
        broker.admin.grant_permission("admin", namespace, PRODUCES, ["produce"])
        for name, sub in ((topic, SUB), (dlq, "reader")):
            broker.admin.create_topic("admin", name, 0)
            broker.admin.create_subscription(
                "admin", name, sub, SubscriptionType.SHARED, initial_position="earliest"
            )
        ids = broker.producing.produce("admin", topic, [_message(i) for i in range(3)])
        broker.producing.produce("admin", dlq, [_message(i) for i in range(2)])
        runs: dict[str, tuple[str, str]] = {}

        def plan(operation: str, caller: str, arguments: object, dag: str) -> None:
            run = Run(dag, f"manual__{operation}-{secrets.token_hex(3)}")
            broker.plan_request(operation, Caller(caller, caller), arguments, run)  # type: ignore[arg-type]
            runs[operation] = (run.dag_id, run.run_id)

        plan(
            "skip-messages",
            PEEKS,
            SkipMessages(topic=topic, subscription=SUB, ids=tuple(ids[:2]), reason="stuck"),
            "cursorops_skip_messages",
        )
        plan(
            "skip-matching",
            PEEKS,
            SkipMatching(
                topic=topic,
                subscription=SUB,
                predicate={"key": KEY, "properties": dict([PROPERTY])},
                matches=(ids[2],),
                reason="stuck",
            ),
            "cursorops_skip_matching",
        )
        plan(
            "redrive",
            "admin",
            RedriveDeadLetters(
                topic=topic, subscription=SUB, predicate={"key": KEY}, reason="fixed"
            ),
            "cursorops_redrive",
        )
        record = broker.workflow.current_plan_record("admin", *runs["redrive"])
        assert record is not None
        broker.apply_approved_plan(record, [{"approver": "bob"}])
    return topic, dlq, runs


def _text(markdown: str) -> str:
    """The preview's Markdown as it reads (punctuation is backslash-escaped in it)."""
    return markdown.replace("\\", "")


def _bodies(api: Api, user: str, topic: str, dlq: str, runs: dict[str, tuple[str, str]]):
    """Every answer that could carry content: (what, status, body text)."""
    paths = {
        f"plan record of {operation}": f"/planRecords/{dag}/{run}"
        for operation, (dag, run) in runs.items()
    }
    paths |= {
        "audit log": rest_path(topic) + "/auditLog",
        "dead-letter audit log": rest_path(dlq) + "/auditLog",
        "open requests": rest_path(topic) + "/openRequests",
        "radar": rest_path(topic) + f"/subscription/{SUB}/poisonRadar?minAgeSeconds=0",
    }
    for what, path in paths.items():
        answer = api.call(user, "GET", path)
        yield what, answer.status_code, answer.text


def test_a_produce_only_role_and_a_viewer_read_no_content_anywhere(api: Api) -> None:
    topic, dlq, runs = _seeded(api)
    seen: dict[str, dict[str, int]] = {}
    for user in (PRODUCES, VIEWER):
        seen[user] = {}
        for what, status, text in _bodies(api, user, topic, dlq, runs):
            seen[user][what] = status
            for secret in SECRETS:
                assert secret not in text, (user, what, secret)
    assert set(seen[VIEWER].values()) == {403}, seen  # no grant at all: refused everywhere
    # The produce-only role reads the records, with sizes and counts in place of content.
    statuses = seen[PRODUCES]
    assert statuses["radar"] == 403  # the radar needs consume
    assert {s for w, s in statuses.items() if w != "radar"} == {200}, statuses
    dag, run = runs["skip-messages"]
    plan = api.call(PRODUCES, "GET", f"/planRecords/{dag}/{run}").json()
    assert plan["contentShown"] is False
    preview = _text(plan["preview"])
    assert "9 bytes, masked" in preview and "1 property, masked" in preview
    assert "16 bytes, masked" in preview  # the payload's full size
    dag, run = runs["redrive"]
    redrive = _text(api.call(PRODUCES, "GET", f"/planRecords/{dag}/{run}").json()["preview"])
    assert "9 bytes, masked" in redrive and "1 property, masked" in redrive
    audit = api.call(PRODUCES, "GET", rest_path(topic) + "/auditLog").json()
    [redriven] = [r for r in audit if r["kind"] == "redrive"]
    assert redriven["detail"]["predicate"] == {"key": "9 bytes, masked"}
    assert len(redriven["detail"]["deadLetterIds"]) == 2  # what was done stays exact


def test_a_role_that_may_peek_reads_the_content(api: Api) -> None:
    topic, dlq, runs = _seeded(api)
    answers = {what: text for what, _, text in _bodies(api, "admin", topic, dlq, runs)}
    for operation in ("skip-messages", "redrive"):
        text = answers[f"plan record of {operation}"]
        assert KEY in _text(text) and "pii" in _text(text), operation
    assert "secret-payload" in _text(answers["plan record of skip-messages"])
    assert KEY in _text(answers["plan record of skip-matching"])  # its predicate
    assert KEY in answers["audit log"]  # the redrive's predicate
    dag, run = runs["skip-messages"]
    answer = api.call(PEEKS, "GET", f"/planRecords/{dag}/{run}")
    assert answer.status_code == 200 and answer.json()["contentShown"] is True
    assert "secret-payload" in _text(answer.json()["preview"])
    # A redrive's messages come from its dead-letter topic: peek on both is needed, and
    # the requester's role holds it here.
    dag, run = runs["redrive"]
    assert api.call(PEEKS, "GET", f"/planRecords/{dag}/{run}").json()["contentShown"] is True


def test_a_plan_record_says_when_it_can_no_longer_be_approved(api: Api) -> None:
    """The Cursors page reads the gate's own stale rule: an applied plan says so first; a
    plan still waiting does not."""
    topic, _dlq, runs = _seeded(api)
    dag, run = runs["redrive"]  # applied by the seeding
    applied = api.call("admin", "GET", f"/planRecords/{dag}/{run}").json()
    assert applied["applied"] is True
    assert applied["stale"].startswith(f"Plan {applied['planDigest']} was applied already")
    assert "make a new request" in applied["stale"]
    preview = _text(applied["preview"])
    assert preview.startswith("> **This request can no longer be approved")
    assert f"Plan {applied['planDigest'][:40]}" in preview
    dag, run = runs["skip-messages"]
    waiting = api.call("admin", "GET", f"/planRecords/{dag}/{run}").json()
    assert waiting["applied"] is False and waiting["stale"] is None
