"""Message content in the CLI: a produce-only role gets no key, property or payload from any
command, in text or JSON; a role that may peek does. Every call is a new process on a
real home."""

from __future__ import annotations

from pathlib import Path

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import Caller, Run, SkipMessages
from cursorops.core.services.producer import OutgoingMessage
from tests.cli.test_cli import cursorops

pytestmark = pytest.mark.e2e

TOPIC = "persistent://acme/cards/payments"
KEY = "card-4111"
SECRETS = (KEY, "pii", "secret-payload")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A topic with content-rich messages (and its dead letters), and a skip request planned
    and open; ``writer`` may produce only, ``reader`` may consume (hence peek)."""
    root = tmp_path / "home"
    dlq = f"{TOPIC}-billing-DLQ"
    message = OutgoingMessage(b"secret-payload", key=KEY, properties={"pii": "yes"})
    with Broker(Config.from_home(root)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/cards")
        broker.admin.grant_permission("admin", "acme/cards", "writer", ["produce"])
        broker.admin.grant_permission("admin", "acme/cards", "reader", ["consume"])
        for topic, sub in ((TOPIC, "billing"), (dlq, "dead")):
            broker.admin.create_topic("admin", topic, 0)
            broker.admin.create_subscription(
                "admin", topic, sub, SubscriptionType.SHARED, initial_position="earliest"
            )
        ids = broker.producing.produce("admin", TOPIC, [message] * 3)
        broker.producing.produce("admin", dlq, [message])
        broker.plan_request(
            "skip-messages",
            Caller("admin", "admin"),
            SkipMessages(topic=TOPIC, subscription="billing", ids=(ids[0],), reason="stuck"),
            Run("cursorops_skip_messages", "manual__open"),
        )
    return root


COMMANDS = (
    ("topics", "peek-messages", TOPIC, "-s", "billing", "-n", "3"),
    ("topics", "consume", TOPIC, "-s", "billing", "-n", "3"),
    ("topics", "redrive", TOPIC, "-s", "billing", "--preview"),
    ("topics", "analyze-backlog", TOPIC, "-s", "billing"),
    ("topics", "stats", TOPIC),
    ("topics", "subscriptions", TOPIC),
    ("audit", "radar", TOPIC, "--min-age-seconds", "0"),
    ("audit", "requests", TOPIC),
    ("audit", "skips", TOPIC),
)


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_produce_only_role_gets_no_content_from_any_command(home: Path, output: str) -> None:
    codes = {}
    for command in COMMANDS:
        run = cursorops(home, "-o", output, *command, role="writer")
        codes[command[1]] = run.code
        for secret in SECRETS:
            assert secret not in run.stdout + run.stderr, (command, secret)
    # What it may read it reads (the open request with its digest); the rest is refused.
    assert {c for c, code in codes.items() if code == 0} == {"stats", "requests", "skips"}


def test_a_role_that_may_peek_reads_the_content(home: Path) -> None:
    run = cursorops(home, "topics", "peek-messages", TOPIC, "-s", "billing", role="reader")
    assert run.code == 0, run.stderr
    assert KEY in run.stdout and "pii" in run.stdout and "secret-payload" in run.stdout
