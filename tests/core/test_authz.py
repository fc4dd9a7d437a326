"""Pulsar's authorization model, operation by operation, through the real Broker.

The expected table follows ``org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider``:
``allowTopicOperationAsync`` (LOOKUP / GET_STATS -> canLookup = produce or consume;
PRODUCE -> canProduce; CONSUME, SUBSCRIBE, UNSUBSCRIBE, GET_SUBSCRIPTIONS, SKIP,
PEEK_MESSAGES, RESET_CURSOR -> canConsume), ``allowNamespaceOperationAsync``
(GET_TOPICS -> produce or consume; CREATE_TOPIC, GRANT_PERMISSION -> tenant admin),
``allowTenantOperationAsync`` (CREATE_NAMESPACE -> tenant admin), and superuser-only
tenant creation and listing. Superusers, and tenant admins inside their tenant,
may do everything else. analyze-backlog is CONSUME (``internalAnalyzeSubscriptionBacklog``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from cursorops.core.domain.authz import ACTIONS, GRANTS_ALLOWING, Operation, check, is_allowed
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import NotAuthorizedError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset, unsubscribe
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.metadata import PERMISSION_ACTIONS, Base

SUPER = {"admin"}
TOPIC = "persistent://acme/ops/orders"


def test_one_action_list() -> None:
    assert PERMISSION_ACTIONS is ACTIONS
    assert {"produce", "consume", "functions", "sources", "sinks", "packages"} == ACTIONS


def test_every_operation_has_a_rule() -> None:
    superuser_only = {
        Operation.CREATE_TENANT,
        Operation.DELETE_TENANT,
        Operation.LIST_TENANTS,
        Operation.LIST_BROKERS,
    }
    assert set(GRANTS_ALLOWING) | superuser_only == set(Operation)


@pytest.mark.parametrize(
    ("operation", "granted", "allowed"),
    [
        (Operation.SKIP, {"consume"}, True),
        (Operation.SKIP, {"produce"}, False),
        (Operation.SKIP, set(), False),
        (Operation.CONSUME, {"consume"}, True),
        (Operation.PRODUCE, {"consume"}, False),
        (Operation.PRODUCE, {"produce"}, True),
        (Operation.LOOKUP, {"produce"}, True),
        (Operation.LOOKUP, {"consume"}, True),
        (Operation.LOOKUP, set(), False),
        (Operation.PEEK_MESSAGES, {"produce"}, False),
        (Operation.PEEK_MESSAGES, {"consume"}, True),
        (Operation.GET_STATS, {"produce"}, True),
        (Operation.GET_SUBSCRIPTIONS, {"produce"}, False),
        (Operation.CREATE_TOPIC, {"produce", "consume"}, False),
        (Operation.CREATE_TENANT, {"produce", "consume"}, False),
        (Operation.CONSUME, {"functions", "sources", "sinks", "packages"}, False),
    ],
)
def test_grants(operation: Operation, granted: set[str], allowed: bool) -> None:
    assert is_allowed("app", operation, superusers=SUPER, granted_actions=granted) is allowed


def test_no_role_is_refused() -> None:
    with pytest.raises(NotAuthorizedError, match="No role"):
        check("", Operation.SKIP, "t", superusers=SUPER)


# -- the matrix, through the Broker -------------------------------------------------

ROLES = {
    "superuser": "admin",
    "tenant-admin": "acme-admin",
    "produce": "app-produce",
    "consume": "app-consume",
    "produce+consume": "app-both",
    "functions": "app-functions",
    "no-grant": "stranger",
    "other-namespace": "app-elsewhere",
}

ANY = set(ROLES)
ADMINS = {"superuser", "tenant-admin"}
CONSUMERS = ADMINS | {"consume", "produce+consume"}
PRODUCERS = ADMINS | {"produce", "produce+consume"}
LOOKUP = CONSUMERS | PRODUCERS

Action = Callable[[Broker, str], object]


def _msg(text: str) -> list[OutgoingMessage]:
    return [OutgoingMessage(payload=text.encode())]


def _skip(b: Broker, role: str) -> object:
    ids = b.reading.peek_messages("admin", TOPIC, "shared", 1)
    return skips.skip_messages(b.gated, role, TOPIC, "shared", [m.message_id for m in ids])


OPERATIONS: dict[str, tuple[Action, set[str]]] = {
    # name: (call, roles allowed): the expected table, from PulsarAuthorizationProvider.
    "create_tenant": (lambda b, r: b.admin.create_tenant(r, "newco"), {"superuser"}),
    "list_tenants": (lambda b, r: b.admin.list_tenants(r), {"superuser"}),
    "create_namespace": (lambda b, r: b.admin.create_namespace(r, "acme/new"), ADMINS),
    "grant_permission": (
        lambda b, r: b.admin.grant_permission(r, "acme/ops", "someone", ["consume"]),
        ADMINS,
    ),
    "create_topic": (lambda b, r: b.admin.create_topic(r, "acme/ops/fresh"), ADMINS),
    "list_topics": (lambda b, r: b.admin.list_topics(r, "acme/ops"), LOOKUP),
    "topic_stats": (lambda b, r: b.analysis.topic_stats(r, TOPIC), LOOKUP),
    "produce": (lambda b, r: b.producing.produce(r, TOPIC, _msg("new")), PRODUCERS),
    "create_subscription": (lambda b, r: b.admin.create_subscription(r, TOPIC, "fresh"), CONSUMERS),
    "list_subscriptions": (lambda b, r: b.admin.list_subscriptions(r, TOPIC), CONSUMERS),
    "update_subscription_properties": (
        lambda b, r: b.admin.update_subscription_properties(r, TOPIC, "shared", {"team": "x"}),
        CONSUMERS,
    ),
    "delete_subscription": (
        lambda b, r: unsubscribe.delete_subscription(b.gated, r, TOPIC, "doomed"),
        CONSUMERS,
    ),
    "consume": (lambda b, r: b.reading.consume(r, TOPIC, "exclusive", 1, ack=True), CONSUMERS),
    "peek_messages": (lambda b, r: b.reading.peek_messages(r, TOPIC, "shared", 1), CONSUMERS),
    "analyze_backlog": (lambda b, r: b.analysis.analyze_backlog(r, TOPIC, "shared"), CONSUMERS),
    "skip_messages": (_skip, CONSUMERS),
    "reset_cursor": (
        lambda b, r: reset.reset_cursor(b.gated, r, TOPIC, "shared", timestamp_ms=0),
        CONSUMERS,
    ),
}


def dump(broker: Broker, config: Config) -> tuple[object, ...]:
    """Every row of every table, and every ledger file with its digest."""
    tables = []
    with broker.metadata.engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            rows = connection.execute(select(table)).all()
            tables.append((table.name, sorted(map(repr, rows))))
    files = []
    for folder, _dirs, names in os.walk(config.ledger_root):
        for name in names:
            path = os.path.join(folder, name)
            files.append((path, hashlib.sha256(Path(path).read_bytes()).hexdigest()))
    return tuple(tables), tuple(sorted(files))


@pytest.fixture
def seeded(tmp_path: Path, metadata_url: str) -> Iterator[tuple[Broker, Config]]:
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    with Broker(config, clock=lambda: 1_700_000_000_000) as b:
        b.admin.create_tenant("admin", "acme", admin_roles=["acme-admin"])
        b.admin.create_namespace("admin", "acme/ops")
        b.admin.create_namespace("admin", "acme/other")
        grants = {
            "app-produce": ["produce"],
            "app-consume": ["consume"],
            "app-both": ["produce", "consume"],
            "app-functions": ["functions"],
        }
        for grantee, actions in grants.items():
            b.admin.grant_permission("admin", "acme/ops", grantee, actions)
        b.admin.grant_permission("admin", "acme/other", "app-elsewhere", ["produce", "consume"])
        b.admin.create_topic("admin", TOPIC)
        for name, kind in (
            ("shared", SubscriptionType.SHARED),
            ("exclusive", SubscriptionType.EXCLUSIVE),
            ("doomed", SubscriptionType.SHARED),
        ):
            b.admin.create_subscription("admin", TOPIC, name, kind, initial_position="earliest")
        b.producing.produce(
            "admin", TOPIC, [OutgoingMessage(payload=f"m{i}".encode()) for i in range(5)]
        )
        yield b, config


@pytest.mark.parametrize("who", sorted(ROLES))
def test_permission_matrix(seeded: tuple[Broker, Config], who: str) -> None:
    broker, config = seeded
    role = ROLES[who]
    for name, (call, allowed) in OPERATIONS.items():
        if who in allowed:
            call(broker, role)
            continue
        before = dump(broker, config)
        with pytest.raises(NotAuthorizedError):
            call(broker, role)
        assert dump(broker, config) == before, f"{name} refused to {who} changed something"


def test_tenant_admin_has_no_rights_in_another_tenant(seeded: tuple[Broker, Config]) -> None:
    broker, _ = seeded
    broker.admin.create_tenant("admin", "other", admin_roles=["other-admin"])
    for call, _allowed in OPERATIONS.values():
        with pytest.raises(NotAuthorizedError):
            call(broker, "other-admin")


def test_find_messages_needs_consume(seeded: tuple[Broker, Config]) -> None:
    """find_messages writes payload excerpts: it authorizes as peek (PEEK_MESSAGES)."""
    pytest.importorskip("pyspark")
    from cursorops.core.domain.analysis.predicates import parse_predicate
    from cursorops.spark import find_messages

    _, config = seeded
    predicate = parse_predicate({"payloadContains": "m"})
    with pytest.raises(NotAuthorizedError):
        find_messages.run(
            config, TOPIC, "shared", predicate, str(config.home / "out"), role="app-produce"
        )
    assert not (config.home / "out").exists()
