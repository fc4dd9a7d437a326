"""``topics unsubscribe`` and ``topics create-subscription`` where the namespace requires
approval: a delete is the unsubscribe workflow's, and a name with history comes back at
latest only (anywhere else is a reset). Each refusal names its workflow and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from cursorops.cli.main import main
from cursorops.core.domain.config import Config
from cursorops.core.domain.plans.plan_record import PlanBinding
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating import unsubscribe
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/vault/ledger"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Six messages, all acknowledged by ``ledger``; the namespace requires approval."""
    with Broker(Config.from_home(tmp_path)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/vault")
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_subscription(
            "admin", TOPIC, "ledger", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(6)])
        skips.skip_head(broker.gated, "admin", TOPIC, "ledger", None)
        broker.admin.set_namespace_policy("admin", "acme/vault", skip_requires_approval=True)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str]:
    try:
        code = main(["--home", str(home), *args])
    except SystemExit as usage:
        code = int(usage.code or 0)
    return code, capsys.readouterr().err


def names(home: Path) -> set[str]:
    with Broker(Config.from_home(home)) as broker:
        return {s.name for s in broker.admin.list_subscriptions("admin", TOPIC)}


def test_a_drained_subscription_is_not_reset_by_delete_and_create(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    asked = ("topics", "unsubscribe", TOPIC, "-s", "ledger", "--reason", "drained")
    code, err = run(capsys, home, *asked)
    assert code == 5 and "cursorops_unsubscribe" in err
    assert names(home) == {"ledger"}
    with Broker(Config.from_home(home)) as broker:  # the approved workflow's apply
        plan = unsubscribe.plan_unsubscribe(broker.gated, "admin", TOPIC, "ledger")
        binding = PlanBinding("cursorops_unsubscribe", "manual__1", "alice", "admin", "unsubscribe")
        record = broker.workflow.save_plan_record(binding, plan, {})
        broker.apply_approved_plan(record, [{"approver": "bob"}])
    for start in ("earliest", "0:0"):
        code, err = run(
            capsys, home, "topics", "create-subscription", TOPIC, "-s", "ledger", "-m", start
        )
        assert code == 5 and "cursorops_reset_cursor" in err, start
        assert names(home) == set()
    assert run(capsys, home, "topics", "create-subscription", TOPIC, "-s", "ledger")[0] == 0
    with Broker(Config.from_home(home)) as broker:
        assert broker.reading.peek_messages("admin", TOPIC, "ledger", 10) == []


def test_audit_requests_names_each_open_plan_by_its_digest(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    with Broker(Config.from_home(home)) as broker:
        plan = unsubscribe.plan_unsubscribe(broker.gated, "admin", TOPIC, "ledger")
        binding = PlanBinding("cursorops_unsubscribe", "manual__2", "alice", "admin", "unsubscribe")
        record = broker.workflow.save_plan_record(binding, plan, {"reason": "retired"})
    assert main(["--home", str(home), "audit", "requests", TOPIC]) == 0
    out = capsys.readouterr().out
    assert f"plan {record.digest}" in out and "not applied" in out and "manual__2" in out
