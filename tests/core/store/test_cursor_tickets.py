"""Every write through the cursor door states its ticket, and the door checks it.

Where the namespace requires approval, a cursor transaction that moves a cursor commits only
with an approved plan record it claims, or as a consumer's acknowledgement of messages
pending for it (:mod:`cursorops.core.store.cursor_ticket`). Two halves:

- the code, read with ``ast``: every call of a writing method of the door, on a name bound
  to a door transaction, passes ``ticket=``; each writing method takes it keyword-only and
  without a default, so a call that forgets it fails; and the writes that claim to move
  nothing are the few listed here;
- the door itself, on a real store: a move with no valid ticket is refused, audited, and
  changes nothing, and an ordinary namespace takes every write as Pulsar does.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cursorops.core.domain.errors import ApprovalRequiredError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.store.cursor_door import REFUSED, CursorTransaction, Hold
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.dispatch_state import DispatchedColumns, SubscriptionTransaction
from cursorops.core.store.metadata import MetadataStore

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = [ROOT / "core", ROOT / "cursorops"]
SYMLINKED = (ROOT / "cursorops" / "core", ROOT / "cursorops" / "spark")

WRITES = {
    "append",
    "append_each",
    "fold",
    "append_to",
    "append_by_subscription",
    "append_cursor_delta",
    "acknowledge_delivered",
    "acknowledge_delivered_through",
    "forget_consumer_ack",
    "compact",
    "create_subscription",
    "remove_subscription",
    "remove_topic",
}
"""The door's methods that write a cursor (or create or delete one with its subscription)."""

DOORS = {"CursorTransaction", "SubscriptionTransaction"}
OPENERS = {"cursor_transaction", "subscription_transaction", "_transaction", "locked_transaction"}

NOT_A_MOVE = {
    "core/services/reading/dispatch.py": (
        "a dispatch folds a long journal into the state it replayed"
    ),
    "core/store/tenancy.py": "a new subscription's cursors (the Broker keeps the history rule)",
    "core/services/broker/admin.py": "a reader's own subscription, deleted as it closes",
    "core/services/gating/reset.py": "a reader's own subscription, which seeks freely",
}
"""Where a write says it moves no cursor: a new one is added here knowingly."""


def shipped_modules() -> list[tuple[str, ast.Module]]:
    found = []
    for folder in SHIPPED:
        for path in sorted(folder.rglob("*.py")):
            if any(path.is_relative_to(link) for link in SYMLINKED) or ".venv" in path.parts:
                continue
            name = path.relative_to(ROOT).as_posix()
            found.append((name, ast.parse(path.read_text(encoding="utf-8"))))
    return found


def _annotation(node: ast.expr | None) -> str:
    return "" if node is None else ast.unparse(node).strip("'\"")


def door_names(function: ast.FunctionDef | ast.AsyncFunctionDef, in_door: bool) -> set[str]:
    """The names bound to a door transaction in ``function``: parameters so annotated,
    ``with ... as NAME`` of a door's opener, and ``self`` in the door's own classes."""
    names = {"self"} if in_door else set()
    arguments = function.args
    for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
        if _annotation(arg.annotation).split(".")[-1] in DOORS:
            names.add(arg.arg)
    for node in ast.walk(function):
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                if not isinstance(call, ast.Call) or not isinstance(item.optional_vars, ast.Name):
                    continue
                opener = call.func.attr if isinstance(call.func, ast.Attribute) else ""
                if isinstance(call.func, ast.Name):
                    opener = call.func.id
                if opener in OPENERS:
                    names.add(item.optional_vars.id)
    return names


def write_sites(module: ast.Module) -> list[tuple[int, str, bool]]:
    """``(line, method, states a ticket)`` of every write through the door in ``module``."""
    found = []

    def visit(node: ast.AST, in_door: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                bases = {ast.unparse(base).split(".")[-1] for base in child.bases}
                visit(child, child.name in DOORS or bool(bases & DOORS))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                names = door_names(child, in_door)
                for call in ast.walk(child):
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and call.func.attr in WRITES
                        and isinstance(call.func.value, ast.Name)
                        and call.func.value.id in names
                    ):
                        ticket = any(k.arg == "ticket" for k in call.keywords)
                        found.append((call.lineno, call.func.attr, ticket))
            else:
                visit(child, in_door)

    visit(module, False)
    return sorted(set(found))


def test_every_write_through_the_door_states_its_ticket() -> None:
    sites = {name: write_sites(module) for name, module in shipped_modules()}
    missing = [
        f"{name}:{line} {method}"
        for name, found in sites.items()
        for line, method, ticket in found
        if not ticket
    ]
    assert missing == []
    # The walk sees the writers it must: every door user writes somewhere it can find.
    writers = {name: {method for _, method, _ in found} for name, found in sites.items() if found}
    assert {
        "core/services/reading/dispatch.py": {
            "acknowledge_delivered",
            "acknowledge_delivered_through",
            "compact",
        },
        "core/services/gating/reset.py": {"append", "forget_consumer_ack"},
        "core/services/gating/undo_skip.py": {"append"},
        "core/services/gating/skip.py": {"append_each", "fold"},
        "core/services/gating/redrive.py": {"append", "append_to"},
        "core/services/gating/unsubscribe.py": {"remove_subscription"},
        "core/services/broker/deletion.py": {"remove_topic"},
        "core/store/tenancy.py": {"create_subscription", "remove_subscription"},
        "core/store/metadata.py": {"append_to", "compact"},
        "core/store/dispatch_state.py": {"append_cursor_delta", "append_by_subscription"},
    }.items() <= writers.items()


@pytest.mark.parametrize(
    "source",
    [
        "def f(store):\n    with store.cursor_transaction() as work:\n        work.append(1, [])",
        "def f(txn: SubscriptionTransaction):\n    txn.append_cursor_delta('t', b'')",
        "class D(CursorTransaction):\n    def g(self):\n        self.compact('t', 's', b'', 0)",
    ],
)
def test_the_walk_sees_a_write_without_a_ticket(source: str) -> None:
    assert [ticket for _, _, ticket in write_sites(ast.parse(source))] == [False]


def test_each_writing_method_takes_its_ticket_keyword_only_without_a_default() -> None:
    for door in (CursorTransaction, SubscriptionTransaction):
        for name in WRITES:
            method = getattr(door, name, None)
            if method is None:
                continue
            parameter = inspect.signature(method).parameters.get("ticket")
            assert parameter is not None, f"{door.__name__}.{name}"
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, f"{door.__name__}.{name}"
            assert parameter.default is inspect.Parameter.empty, f"{door.__name__}.{name}"


def test_the_writes_that_move_nothing_are_the_listed_ones() -> None:
    claimed = set()
    for name, module in shipped_modules():
        for node in ast.walk(module):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "not_a_move"
                and name != "core/store/cursor_ticket.py"
            ):
                claimed.add(name)
    assert claimed == set(NOT_A_MOVE)


# -- the door on a real store ---------------------------------------------------------

VAULT = "persistent://acme/vault/door"
OPEN = "persistent://acme/ops/door"


@pytest.fixture
def store(metadata_url: str) -> Iterator[MetadataStore]:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
        for namespace in ("acme/vault", "acme/ops"):
            store.create_namespace(namespace)
        store.set_skip_requires_approval("acme/vault", True)
        for topic in (VAULT, OPEN):
            store.create_topic(topic, 0)
            store.create_subscription(topic, "s", SubscriptionType.SHARED, {}, {topic: b""})
        yield store


def _moves(work: CursorTransaction, topic: str, ticket: Ticket) -> dict[str, object]:
    """Each writing method of the door once, as a cursor move with ``ticket``."""

    def by_id() -> int:
        ((cursor_id, _),) = work.read(topic, "s", [topic])
        return cursor_id

    def locked() -> None:
        work.lock(topic, "s", Hold.MOVE)

    return {
        "append": lambda: work.append(by_id(), [b"d"], ticket=ticket),
        "append_each": lambda: work.append_each([(by_id(), [b"d"])], ticket=ticket),
        "fold": lambda: work.fold(by_id(), b"", 0, [b"d"], ticket=ticket),
        "forget_consumer_ack": lambda: work.forget_consumer_ack(by_id(), ticket=ticket),
        "append_to": lambda: (locked(), work.append_to(topic, "s", [b"d"], ticket=ticket)),
        "compact": lambda: (locked(), work.compact(topic, "s", b"x", 0, ticket=ticket)),
        "append_by_subscription": lambda: work.append_by_subscription(
            work.lock(topic, "s", Hold.DISPATCH), "s", topic, b"d", ticket=ticket
        ),
        "remove_subscription": lambda: work.remove_subscription(topic, "s", ticket=ticket),
        "remove_topic": lambda: work.remove_topic(topic, "x", 0, force=True, ticket=ticket),
        "create_subscription": lambda: work.create_subscription(
            topic, "new", "Shared", {}, {topic: b""}, ticket=ticket
        ),
    }


MOVES = sorted(_moves(None, VAULT, Ticket.ungated("x")))  # type: ignore[arg-type]


def _state(store: MetadataStore, topic: str) -> tuple[object, ...]:
    record = store.load_cursor(topic, "s")
    names = [s.name for s in store.list_subscriptions(topic)]
    return record.snapshot, tuple(record.deltas), record.version, tuple(names)


@pytest.mark.parametrize("move", [m for m in MOVES if m != "create_subscription"])
@pytest.mark.parametrize(
    "ticket",
    [Ticket.ungated("a skip applied at once"), Ticket.delivered_to("c-1")],
    ids=["ungated", "delivered-unchecked"],
)
def test_a_move_without_a_valid_ticket_is_refused_audited_and_changes_nothing(
    store: MetadataStore, move: str, ticket: Ticket
) -> None:
    before = _state(store, VAULT)
    with (
        pytest.raises(ApprovalRequiredError, match="acme/vault requires"),
        store.cursor_transaction() as work,
    ):
        _moves(work, VAULT, ticket)[move]()
    assert _state(store, VAULT) == before
    (record,) = store.audit_log(VAULT, kinds=[REFUSED])
    assert record.subscription == "s"
    assert record.detail["ticket"] == str(ticket)


@pytest.mark.parametrize("move", MOVES)
def test_a_move_of_an_approved_plan_it_does_not_claim_is_refused(
    store: MetadataStore, move: str
) -> None:
    before = _state(store, VAULT)
    with (
        pytest.raises(ApprovalRequiredError, match="without claiming"),
        store.cursor_transaction() as work,
    ):
        _moves(work, VAULT, Ticket.approved_plan("f" * 64))[move]()
    assert _state(store, VAULT) == before
    (record,) = store.audit_log(VAULT, kinds=[REFUSED])
    assert record.detail["ticket"] == f"approved plan ({'f' * 64})"


@pytest.mark.parametrize("move", MOVES)
def test_an_ordinary_namespace_takes_every_write(store: MetadataStore, move: str) -> None:
    with store.cursor_transaction() as work:
        _moves(work, OPEN, Ticket.ungated("a skip applied at once"))[move]()
    assert store.audit_log(OPEN, kinds=[REFUSED]) == []


def _dispatched(txn: SubscriptionTransaction, consumer: str, entries: list[int]) -> None:
    n = len(entries)
    ints = np.asarray(entries, np.int64)
    txn.record_dispatched(
        VAULT,
        DispatchedColumns(
            consumer,
            np.full(n, 1, np.int64),
            ints,
            np.full(n, -1, np.int64),
            np.zeros(n, np.int64),
            np.zeros(n, np.bool_),
            None,
        ),
    )


def _ack(txn: SubscriptionTransaction, consumer: str, entries: list[int]) -> None:
    from cursorops.core.domain.acks import cursor_codec
    from cursorops.core.domain.acks.cursor import AckColumns

    n = len(entries)
    ledger, entry = np.full(n, 1, np.int64), np.asarray(entries, np.int64)
    index, sizes = np.full(n, -1, np.int64), np.zeros(n, np.int64)
    payload = cursor_codec.encode_columns(AckColumns.of(ledger, entry, index, sizes))
    txn.acknowledge_delivered(
        VAULT, ledger, entry, index, lambda: sizes, payload, ticket=Ticket.delivered_to(consumer)
    )


def test_an_ack_of_messages_not_pending_for_the_consumer_is_refused(
    store: MetadataStore,
) -> None:
    with store.subscription_transaction(VAULT, "s", 0) as txn:
        _dispatched(txn, "c-1", [0, 1])
        _dispatched(txn, "c-2", [2])
    before = _state(store, VAULT)
    for consumer, entries in (("c-1", [0, 2]), ("c-1", [5]), ("c-3", [0])):
        with (
            pytest.raises(ApprovalRequiredError, match="not delivered to the consumer"),
            store.subscription_transaction(VAULT, "s", 0) as txn,
        ):
            _ack(txn, consumer, entries)
        assert _state(store, VAULT) == before
    assert len(store.audit_log(VAULT, kinds=[REFUSED])) == 3
    with store.subscription_transaction(VAULT, "s", 0) as txn:
        _ack(txn, "c-1", [0, 1])
    assert len(store.load_cursor(VAULT, "s").deltas) == 1
    pending = store.pending_members(VAULT, "s")[VAULT]
    assert pending.entry.tolist() == [2]
