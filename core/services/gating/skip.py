"""The skips, gated operations: by message ids, by matching (from a scan's result), the
head of the backlog (``skip -n``) and the whole backlog (``clear-backlog``).

All four plan a :class:`~cursorops.core.domain.acks.skip_plan.SkipPlan`, are recorded as ``skip``
and apply an approved record the same way; they differ in what they ask for and in what
their preview document says (a predicate, the head). A head's record says ``head`` in
its document, which its digest covers: its apply accepts any subscription type, as
Pulsar's ``skip -n`` does, where a skip of chosen messages needs a Shared or Key_Shared
subscription.

The preview document (:func:`skip_document`) is what the approver reads besides the
plan: the request, the exact backlog before and after per partition, and the first
messages described (key, times, properties, a payload excerpt), built from the stores.

Writing: the cursors locked and read once, each skip decided in turn against them, its
acknowledgements and audit record, all in one transaction (:func:`write_skips`). Every
skip, from every front door, is written there: one plan alone (``skip -n``, an approved
plan, ``apply_skip``), or the skips of one subscription that queued while another was
being written (:class:`SkipWrites`, :mod:`cursorops.core.domain.combining`). A batch is the same
as its skips written one after the other: each is decided against the cursors as the
skips before it in the batch left them, and gets its own audit record (its skip id) and
its own journal delta per cursor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks import cursor_codec, skip
from cursorops.core.domain.acks.chunk_ids import whole_chunked_messages
from cursorops.core.domain.acks.cursor import AckColumns, CursorState
from cursorops.core.domain.acks.head import head_messages
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.acks.skip_plan import SkipColumns, SkipPlan
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.combining import Combiner
from cursorops.core.domain.content import shown
from cursorops.core.domain.durations import format_time_ms
from cursorops.core.domain.errors import (
    InvalidArgumentError,
    InvalidSkipPlanError,
    TopicNotFoundError,
    UnsupportedSubscriptionTypeError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.plans.preview import (
    Effects,
    MessageRow,
    PartitionChange,
    Preview,
    count,
    predicate_text,
    request_of,
    time_text,
)
from cursorops.core.services.gating.operation import (
    SKIP,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatedOperation,
    GatingServices,
    Planned,
)
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.values import AuditEntry

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.store.metadata import MetadataStore
    from cursorops.core.store.read_view import ReadView
    from cursorops.core.store.values import SegmentInfo, TopicInfo


FOLD_AFTER_DELTAS = 32
"""A skip that read this many deltas after a cursor's snapshot folds them into a new one, in
its own transaction. Each read of a cursor decodes every delta after its snapshot (about 25
us each); a snapshot costs one encoding and two statements. The dispatcher folds only after
:data:`~cursorops.core.store.cursor_door.COMPACT_AFTER_DELTAS`, when it reads the cursor anyway."""


@dataclass(frozen=True)
class ValidatedSkip:
    """A skip plan validated against the ledgers, ready to be written.

    ``items`` are its messages as validated, ``source`` each one's row in the plan,
    ``layouts`` the partitions they are on (only their cursors are locked: a skip waits
    for no writer of the partitions it leaves alone). ``planned_now``: the plan was made
    by the same call, so what is acknowledged under the locks was acknowledged before it
    (reported as already acknowledged, never as acknowledged meanwhile).
    """

    role: str
    info: TopicInfo
    plan: SkipPlan
    items: SkipColumns
    source: npt.NDArray[np.int64]
    layouts: Mapping[str, LedgerLayout]
    via: str
    approval: Approval | None = None
    planned_now: bool = False

    def decide(
        self, state_of: Mapping[str, CursorState], at_ms: int
    ) -> tuple[dict[str, AckColumns], skip.SkipOutcome, AuditEntry]:
        """What this skip acknowledges on each partition, given the cursors as they are
        under their row locks, its outcome (without its skip id) and its audit record."""
        items, plan = self.items, self.plan
        was_acked = (
            np.ones(len(self.source), dtype=np.bool_)
            if self.planned_now
            else plan.columns.already_acknowledged[self.source]
        )
        acked = np.zeros(len(items), dtype=np.bool_)
        for code, name in enumerate(items.names):
            rows = np.flatnonzero(items.name_index == code)
            acked[rows] = state_of[name].acked_many(
                items.ledger_id[rows], items.entry_id[rows], items.batch_index[rows]
            )
        fresh = np.flatnonzero(~acked)
        per_partition = dict.fromkeys(plan.partitions(), 0)
        counts = np.bincount(items.name_index[fresh], minlength=len(items.names))
        for name, n in zip(items.names, counts.tolist(), strict=True):
            per_partition[name] += n
        outcome = skip.SkipOutcome(
            self.info.name,
            plan.subscription,
            plan.plan_id,
            skipped=items.take(fresh),
            already_acknowledged=items.take(np.flatnonzero(acked & was_acked)),
            acknowledged_meanwhile=items.take(np.flatnonzero(acked & ~was_acked)),
            per_partition=per_partition,
            part_of=plan.part_of,
        )
        # The record's own id is the skip id: the detail does not repeat it.
        extra = self.approval.detail() if self.approval else {}
        detail = {**outcome.to_pulsar_json(), "via": self.via, **extra}
        del detail["skipId"]
        acks = {
            name: skip.acknowledgements(items, fresh[items.name_index[fresh] == code])
            for code, name in enumerate(items.names)
        }
        entry = AuditEntry("skip", self.info.name, plan.subscription, self.role, detail, at_ms)
        return acks, outcome, entry


def write_skips(
    metadata: MetadataStore, skips: Sequence[ValidatedSkip], at_ms: int
) -> list[skip.SkipOutcome]:
    """Write ``skips`` (all of one topic and subscription) in one cursor transaction: the
    subscription held shared and the cursors of every partition they touch locked and
    read once (in the one lock order), each skip decided in turn, its journal deltas, its
    audit record and an approved plan's claim. All of it commits, or nothing does. Each
    outcome carries its skip id."""
    first = skips[0]
    topic, subscription = first.info.name, first.plan.subscription
    if any(s.info.name != topic or s.plan.subscription != subscription for s in skips):
        raise ValueError("Skips written together must be of one topic and subscription")
    # The content hashes are a pass over every item: taken before the row locks.
    for s in skips:
        _ = s.plan.plan_id
    # Each partition as the latest skip to read its ledgers saw it.
    layouts: dict[str, LedgerLayout] = {}
    for s in skips:
        layouts.update(s.layouts)
    names = sorted(layouts)
    outcomes: list[skip.SkipOutcome] = []
    ticket = Ticket.gated([s.approval.digest if s.approval else None for s in skips], "skip")
    with metadata.cursor_transaction() as work:
        read = work.read(topic, subscription, names)
        states = [replay(record, layouts[n]) for (_, record), n in zip(read, names, strict=True)]
        # A long journal is folded into a snapshot of the cursor as read, before this
        # transaction's deltas: the next reader replays a short journal again.
        folds = {
            n: cursor_codec.encode(state)
            for (_, record), n, state in zip(read, names, states, strict=True)
            if len(record.deltas) >= FOLD_AFTER_DELTAS
        }
        state_of = dict(zip(names, states, strict=True))
        payloads: dict[str, list[bytes]] = {n: [] for n in names}
        entries = []
        for s in skips:
            acks, outcome, entry = s.decide(state_of, at_ms)
            for name, ack in acks.items():
                if len(ack):
                    payloads[name].append(cursor_codec.encode_columns(ack))
                    if len(skips) > 1:
                        # The next skip of the batch sees this one's acknowledgements.
                        state_of[name].merge(ack.to_state(), layouts[name])
            outcomes.append(outcome)
            entries.append(entry)
        appends = []
        for (cursor_id, record), n in zip(read, names, strict=True):
            if n in folds:
                work.fold(cursor_id, folds[n], record.version, payloads[n], ticket=ticket)
            elif payloads[n]:
                appends.append((cursor_id, payloads[n]))
        work.append_each(appends, ticket=ticket)
        named = []
        audit_ids = work.record_audits(entries)
        for s, outcome, audit_id in zip(skips, outcomes, audit_ids, strict=True):
            if s.approval is not None:
                applied = s.approval.claim(
                    audit_id,
                    skipped=len(outcome.skipped),
                    alreadyAcknowledged=len(outcome.already_acknowledged),
                    acknowledgedMeanwhile=len(outcome.acknowledged_meanwhile),
                )
                work.claim_plan(s.approval.digest, at_ms, applied)
            named.append(outcome.with_skip_id(audit_id))
    return named


SKIPS_PER_BATCH = 64
"""At most this many skips of one subscription, queued while another was being written,
are written together in one transaction (:mod:`cursorops.core.domain.combining`)."""
BATCHED_UP_TO = 1_000
"""Skips of at most this many messages are written in batches (so a batch writes at most
64,000); a larger one is written alone, waiting only for the cursor locks it takes."""


@dataclass(frozen=True)
class _Partitions:
    """What :func:`_read` read of a topic's partitions."""

    owners: Mapping[int, tuple[str, int]]
    """Each ledger of the topic: (partition name, partition index or -1)."""
    layouts: Mapping[str, LedgerLayout]
    facts: Mapping[str, skip.SkipLookup]
    states: Mapping[str, CursorState]


@dataclass(frozen=True)
class _Listed:
    """What :func:`_list` read in a metadata transaction (owners and
    layouts as in :class:`_Partitions`)."""

    owners: Mapping[int, tuple[str, int]]
    layouts: Mapping[str, LedgerLayout]
    segments: Mapping[str, Sequence[SegmentInfo]]


def _partitions_of(
    ids: skip.IdArrays,
) -> Callable[[Mapping[int, tuple[str, int]]], list[str]]:
    """The partitions the ids' ledgers are on (unknown ledgers name none)."""

    def partitions_of_ids(owners: Mapping[int, tuple[str, int]]) -> list[str]:
        ledgers = np.unique(ids.ledger_ids).tolist()
        return sorted({owners[ledger][0] for ledger in ledgers if ledger in owners})

    return partitions_of_ids


def skip_messages(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    ids: Sequence[MessageId],
    *,
    via: str = "broker",
) -> skip.SkipOutcome:
    """PIP-423 skip, the one path of every front door: validate, then acknowledge in one
    transaction with its audit record (``via`` names the door: ``cursorops.cli``, ``rest``,
    ...).

    Raises before writing anything when any id is bad. Shared and Key_Shared
    only ("Unsupported subscription type." otherwise). A partition's name
    (``t-partition-2``) skips on that partition only and refuses ids of others,
    as Pulsar's REST path does. On a namespace that requires approval it is
    refused (ApprovalRequiredError) before anything is read.
    """
    validated = validate_skip(services, role, topic, subscription, ids, via=via)
    if len(validated.items) > BATCHED_UP_TO:
        return _write(services, validated)
    # Skips of this subscription that wait for the same cursors are written together.
    key = (validated.info.name, subscription)
    return skip_writes(services).submit(key, frozenset(validated.layouts), validated)


def validate_skip(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    ids: Sequence[MessageId],
    *,
    via: str = "broker",
) -> ValidatedSkip:
    """What :func:`skip_messages` writes, validated as it validates it: nothing written."""
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    # One read transaction authorizes, then lists what validates the ids (files: after).
    with services.metadata.reading() as view:
        info = services.access.authorized_topic_in(
            view, role, Operation.SKIP, name.base if name.is_partition else name
        )
        services.access.refuse_without_approval(info, "skips")
        if not ids:
            raise InvalidArgumentError("No message ids given")
        asked = skip.IdArrays.of(ids)
        listed = _list(view, info, subscription, _partitions_of(asked), any_type=False)
    selection, layouts = _validate(services, asked, listed, subscription, with_states=False)
    plan = SkipPlan(info.name, subscription, selection.columns, services.clock())
    if name.is_partition:
        plan.check_only_on(str(name))
    # The plan was validated a moment ago by this call: validating it again would only
    # read the same ledger lists, which no cursor lock protects either. What is still
    # unacknowledged is decided under the locks, once: what is acknowledged there was
    # acknowledged before this call (nothing came "meanwhile").
    rows = np.arange(len(plan.columns), dtype=np.int64)
    return ValidatedSkip(role, info, plan, plan.columns, rows, layouts, via, planned_now=True)


def plan_skip(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    ids: Sequence[MessageId],
) -> SkipPlan:
    """Validate and route ``ids`` without changing anything: the plan to preview and approve.

    Every id is checked against the topic's ledgers (all-or-nothing, every
    bad id named); the plan records each message's partition, batch size,
    delivery time and whether it is already acknowledged. Stamped with the
    broker's clock.
    """
    info = services.access.authorized_topic(role, Operation.SKIP, topic)
    if not ids:
        raise InvalidArgumentError("No message ids given")
    selection, _ = _validated_skip(
        services, info, subscription, skip.IdArrays.of(ids), with_states=True
    )
    return SkipPlan(info.name, subscription, selection.columns, services.clock())


def plan_skip_head(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    limit: int | None,
) -> SkipPlan:
    """The first ``limit`` unacknowledged messages of each partition (``skip -n``), or all of
    them (``limit`` None: ``clear-backlog``), as a skip plan to preview, approve and apply.

    Messages are counted, not entries (:mod:`cursorops.core.domain.acks.head`): a batch of 100
    is 100 messages, a chunked message one (all its chunks taken, or none).
    Each partition skips its own ``limit``, as pulsar-admin's
    ``skip -n`` does on a partitioned topic; a partition's name limits it to that one.
    Any subscription type may skip its head, as in Pulsar.
    """
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    info = services.access.authorized_topic(
        role, Operation.SKIP, name.base if name.is_partition else name
    )
    return _head(services, info, name, subscription, limit)[0]


def skip_head(
    services: GatingServices,
    role: str,
    topic: str | TopicName,
    subscription: str,
    limit: int | None,
    *,
    via: str = "broker",
) -> skip.SkipOutcome:
    """``skip -n`` (``limit``) or ``clear-backlog`` (None) at once, with its audit record.

    On a namespace that requires approval it is refused (ApprovalRequiredError)
    before anything is read. The head is chosen a moment before the cursors are
    locked: a message a consumer acknowledges in that moment is reported as
    acknowledged meanwhile, and not replaced by a later one.
    """
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    info = services.access.authorized_topic(
        role, Operation.SKIP, name.base if name.is_partition else name
    )
    services.access.refuse_without_approval(info, "skips", "the cursorops_skip_head workflow")
    plan, layouts = _head(services, info, name, subscription, limit)
    rows = np.arange(len(plan.columns), dtype=np.int64)
    return _write(services, ValidatedSkip(role, info, plan, plan.columns, rows, layouts, via))


def _head(
    services: GatingServices, info: TopicInfo, name: TopicName, subscription: str, limit: int | None
) -> tuple[SkipPlan, Mapping[str, LedgerLayout]]:
    """The head's skip plan, and the layouts of the partitions it read (one read)."""
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise InvalidArgumentError(f"Invalid number of messages {limit!r}: expected 1 or more")
    chosen = [str(name)] if name.is_partition else info.partition_names()
    if name.is_partition and str(name) not in info.partition_names():
        raise TopicNotFoundError(
            f"Topic '{name}' not found: {info.name} has {info.partitions} partitions"
        )
    read = _read(services, info, subscription, lambda _: chosen, with_states=True, any_type=True)
    heads = [
        head_messages(
            read.states[p],
            read.facts[p],
            limit,
            None if read.facts[p].chunk_rest is None else services.context.chunked_messages(p),
        )
        for p in chosen
    ]
    ids = skip.IdArrays(
        np.concatenate([h.ledger_id for h in heads]),
        np.concatenate([h.entry_id for h in heads]),
        np.full(sum(len(h) for h in heads), -1, dtype=np.int64),
        np.concatenate([h.batch_index for h in heads]),
    )
    selection = skip.validate(ids, read.owners, read.facts, read.states)
    plan = SkipPlan(info.name, subscription, selection.columns, services.clock())
    return plan, {n: read.layouts[n] for n in selection.columns.names}


def _read(
    services: GatingServices,
    info: TopicInfo,
    subscription: str,
    wanted_of: Callable[[Mapping[int, tuple[str, int]]], Sequence[str]],
    *,
    with_states: bool,
    any_type: bool = False,
) -> _Partitions:
    """What validating or choosing messages reads, in one read transaction: the
    subscription, every partition's ledger list (it serves both the routing and the
    range checks), the segments and cursors of the partitions ``wanted_of`` the
    ledger owners names.

    ``with_states``: read those partitions' cursors to mark what is acknowledged already;
    without, nothing is marked (an apply decides that from the cursors under their locks).
    ``any_type``: any subscription type (a head skip); else Shared or Key_Shared only.
    """
    with services.metadata.reading() as view:
        listed = _list(view, info, subscription, wanted_of, any_type=any_type)
    return _partitions(services, listed, subscription, with_states=with_states)


def _list(
    view: ReadView,
    info: TopicInfo,
    subscription: str,
    wanted_of: Callable[[Mapping[int, tuple[str, int]]], Sequence[str]],
    *,
    any_type: bool,
) -> _Listed:
    """:func:`_read`'s statements, in the caller's read transaction."""
    owners: dict[int, tuple[str, int]] = {}
    layouts: dict[str, LedgerLayout] = {}
    sub = view.subscription(info.name, subscription)
    if not any_type and not sub.type.allows_skip:
        raise UnsupportedSubscriptionTypeError(
            f"Unsupported subscription type. Skipping messages needs a Shared or "
            f"Key_Shared subscription; '{subscription}' is {sub.type.value}"
        )
    ledger_lists = view.ledgers_of(info.partition_names())
    for index, partition in enumerate(info.partition_names()):
        ledgers = ledger_lists[partition]
        layouts[partition] = LedgerLayout.of((i.ledger_id, i.entries) for i in ledgers)
        for ledger in ledgers:
            owners[ledger.ledger_id] = (partition, index if info.partitions else -1)
    wanted = sorted(wanted_of(owners))
    return _Listed(owners, {name: layouts[name] for name in wanted}, view.segments_of(wanted))


def _partitions(
    services: GatingServices, listed: _Listed, subscription: str, *, with_states: bool
) -> _Partitions:
    """The listed partitions' entries (from the segment files) and, ``with_states``,
    cursors: read outside any metadata transaction."""
    facts = {
        name: services.context.entry_arrays(name, layout, listed.segments[name])
        for name, layout in listed.layouts.items()
    }
    states = {
        name: services.context.cursor_state(name, subscription, layout)
        if with_states
        else CursorState()
        for name, layout in listed.layouts.items()
    }
    return _Partitions(listed.owners, listed.layouts, facts, states)


def _validated_skip(
    services: GatingServices,
    info: TopicInfo,
    subscription: str,
    ids: skip.IdArrays,
    *,
    with_states: bool,
    any_type: bool = False,
) -> tuple[skip.SkipSelection, dict[str, LedgerLayout]]:
    """:func:`cursorops.core.domain.acks.skip.validate` against the stores as they are now, and the
    ledger layouts of the partitions the ids are on."""
    with services.metadata.reading() as view:
        listed = _list(view, info, subscription, _partitions_of(ids), any_type=any_type)
    return _validate(services, ids, listed, subscription, with_states=with_states)


def _validate(
    services: GatingServices,
    ids: skip.IdArrays,
    listed: _Listed,
    subscription: str,
    *,
    with_states: bool,
) -> tuple[skip.SkipSelection, dict[str, LedgerLayout]]:
    """:func:`_validated_skip` against what :func:`_list` read."""
    read = _partitions(services, listed, subscription, with_states=with_states)
    ids = whole_chunked_messages(ids, read.owners, read.facts, services.context.chunked_messages)
    return skip.validate(ids, read.owners, read.facts, read.states), dict(read.layouts)


def apply_skip(
    services: GatingServices,
    role: str,
    plan: SkipPlan,
    *,
    via: str = "broker",
) -> skip.SkipOutcome:
    """Acknowledge exactly the plan's messages, all partitions in one transaction.

    The plan may be stale or forged, so it is validated again against the
    current ledgers and cursor (authorization, subscription type, every id in
    the topic, partition routing, batch index range): any bad item raises and
    nothing is written. Which messages are still unacknowledged is decided from
    the cursors read under their row locks, in the writing transaction, so a
    message acknowledged by anyone since planning is reported as
    ``acknowledged_meanwhile``, never as skipped. The acknowledgements and the
    audit record (stamped with the broker's clock) commit in that one
    transaction, or neither does; ``via`` names the front door in the record
    (``cursorops.cli``, ``spark``, ...). Idempotent: applying again acknowledges nothing more.
    On a namespace that requires approval it is refused: only an approved plan
    record applies there (:func:`apply_approved_skip`).
    """
    info = services.access.authorized_topic(role, Operation.SKIP, plan.topic)
    services.access.refuse_without_approval(info, "skips")
    return _write(services, _validated_plan(services, info, role, plan, via, None, any_type=False))


def apply_approved_skip(
    services: GatingServices, plan: SkipPlan, approval: Approval, *, any_type: bool
) -> skip.SkipOutcome:
    """Apply the approved ``plan`` of a plan record, as its requester's role.

    Validated once against the ledgers as they are now, and refused (nothing
    applied) unless it gives exactly the approved messages: one gone, moved to
    another partition, or a chunked message grown since planning refuses it. Then
    decided under the cursors' row locks (what was acknowledged meanwhile is
    reported) and written with its audit record and the record's claim (applied at
    most once) in one transaction. ``any_type``: a head skip, which any subscription
    type may make (Pulsar's ``skip -n``); else Shared or Key_Shared only.
    """
    info = services.access.authorized_topic(approval.role, Operation.SKIP, plan.topic)
    validated = _validated_plan(
        services, info, approval.role, plan, approval.via, approval, any_type=any_type
    )
    outside = _keys(validated.items) - _keys(plan.columns)
    if outside or len(validated.items) != len(plan):
        raise InvalidSkipPlanError(
            f"Plan {approval.digest} would acknowledge messages outside the approved set "
            f"now ({len(outside)} of them): nothing applied"
        )
    return _write(services, validated)


def _validated_plan(
    services: GatingServices,
    info: TopicInfo,
    role: str,
    plan: SkipPlan,
    via: str,
    approval: Approval | None,
    *,
    any_type: bool,
) -> ValidatedSkip:
    """``plan`` validated against the ledgers (one read), ready to write."""
    if info.name != plan.topic:
        raise InvalidSkipPlanError(
            f"Invalid skip plan: topic '{plan.topic}' is not a canonical topic name ('{info.name}')"
        )
    columns = plan.columns
    if skip.has_repeats(columns.ledger_id, columns.entry_id, columns.batch_index):
        raise InvalidSkipPlanError(
            f"Invalid skip plan {plan.plan_id}: a message is listed twice; nothing skipped"
        )
    ids = skip.IdArrays(columns.ledger_id, columns.entry_id, columns.partition, columns.batch_index)
    selection, layouts = _validated_skip(
        services, info, plan.subscription, ids, with_states=False, any_type=any_type
    )
    items, source = selection.columns, selection.source
    # The plan's partition of each validated item, in the validation's numbering.
    code_of = {name: code for code, name in enumerate(items.names)}
    planned_code = np.array([code_of.get(name, -1) for name in columns.names], dtype=np.int64)
    elsewhere = np.flatnonzero(planned_code[columns.name_index[source]] != items.name_index)
    if elsewhere.size:
        row = int(elsewhere[0])
        said = columns.names[int(columns.name_index[source[row]])]
        raise InvalidSkipPlanError(
            f"Invalid skip plan {plan.plan_id}: {items.item(row).message_id.triplet()} is on "
            f"'{items.names[int(items.name_index[row])]}', not '{said}'; nothing skipped"
        )
    return ValidatedSkip(role, info, plan, items, source, layouts, via, approval)


def _write(services: GatingServices, validated: ValidatedSkip) -> skip.SkipOutcome:
    return write_skips(services.metadata, [validated], services.clock())[0]


def _keys(c: SkipColumns) -> set[tuple[str, int, int, int]]:
    """Each message as (partition, ledger, entry, batch index)."""
    return {
        (c.names[n], led, ent, b)
        for n, led, ent, b in zip(
            c.name_index.tolist(),
            c.ledger_id.tolist(),
            c.entry_id.tolist(),
            c.batch_index.tolist(),
            strict=True,
        )
    }


class SkipWrites:
    """One Broker's queue of skips to write: the skips of one subscription that wait for
    the same cursors are written together, in one transaction (:func:`write_skips`)."""

    def __init__(self, metadata: MetadataStore, clock: Callable[[], int]) -> None:
        self.metadata = metadata
        self.clock = clock
        self._batches: Combiner[tuple[str, str], ValidatedSkip, skip.SkipOutcome] = Combiner(
            self._write_batch, max_batch=SKIPS_PER_BATCH
        )

    def submit(
        self, key: tuple[str, str], holds: frozenset[str], validated: ValidatedSkip
    ) -> skip.SkipOutcome:
        """Write ``validated``, with the skips of ``key`` queued meanwhile that need none of
        the cursors a running batch ``holds``."""
        return self._batches.submit(key, holds, validated)

    def _write_batch(
        self, _key: tuple[str, str], batch: Sequence[ValidatedSkip]
    ) -> list[skip.SkipOutcome]:
        return write_skips(self.metadata, batch, self.clock())


def skip_writes(services: GatingServices) -> SkipWrites:
    """The Broker's one queue of skips to write, made on first use."""
    return services.per_broker("skip-writes", lambda: SkipWrites(services.metadata, services.clock))


PREVIEW_ROWS = 50
"""Messages the preview describes; the rest are counted."""
PAYLOAD_EXCERPT = 60
"""Characters of a payload the preview shows."""


def _ids(value: object, what: str) -> tuple[MessageId, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidArgumentError(f"Invalid {what}: expected a list of message ids")
    ids = tuple(value)
    if not all(isinstance(m, MessageId) for m in ids):
        raise InvalidArgumentError(f"Invalid {what}: expected message ids")
    return ids


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


@dataclass(frozen=True, kw_only=True)
class SkipMessages(GatedArguments):
    """Skip exactly ``ids`` (``topic`` may name one partition: then only ids of it)."""

    ids: tuple[MessageId, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "ids", _ids(self.ids, "message ids"))
        if not self.ids:
            raise InvalidArgumentError("No message ids given")


@dataclass(frozen=True, kw_only=True)
class SkipMatching(GatedArguments):
    """Skip what a scan matched: ``matches`` are the scan's output (its match list, as ids),
    ``predicate`` the document it ran, shown to the approver. The ids are validated against
    the stores as any skip's are; the scan itself runs before (on Spark)."""

    predicate: Mapping[str, Any]
    matches: tuple[MessageId, ...]
    request: str | None = None
    """The digest of the request record the scan ran for
    (:mod:`cursorops.core.domain.plans.request_record`), kept in the plan's document: the plan
    record is chained to the request it answers."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.request is not None and not _is_digest(self.request):
            raise InvalidArgumentError("Invalid request digest: expected 64 hexadecimal digits")
        if not isinstance(self.predicate, Mapping):
            raise InvalidArgumentError("Invalid predicate: expected a predicate document")
        object.__setattr__(self, "matches", _ids(self.matches, "matches"))
        if not self.matches:
            raise InvalidArgumentError("The predicate matches no unacknowledged message")


@dataclass(frozen=True, kw_only=True)
class HeadArguments(GatedArguments):
    """A skip of the head of a subscription's backlog, of :attr:`limit` messages per
    partition (None: all of them)."""

    @property
    def limit(self) -> int | None:
        return None


@dataclass(frozen=True, kw_only=True)
class SkipHead(HeadArguments):
    """Skip the first ``messages`` unacknowledged messages of each partition (``skip -n``;
    a batch counts its messages)."""

    messages: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.messages, bool) or not isinstance(self.messages, int):
            raise InvalidArgumentError(f"Invalid number of messages {self.messages!r}")
        if self.messages < 1:
            raise InvalidArgumentError(
                f"Invalid number of messages {self.messages!r}: expected 1 or more"
            )

    @property
    def limit(self) -> int | None:
        return self.messages


@dataclass(frozen=True, kw_only=True)
class ClearBacklog(HeadArguments):
    """Skip every message the subscription has not acknowledged (``clear-backlog``)."""


S = TypeVar("S", bound=GatedArguments)
_S = TypeVar("_S", bound="_Skip[Any]")


def _described(services: GatingServices, role: str, plan: SkipPlan) -> list[dict[str, Any]]:
    """Key, publish time, deliver-at, properties and a payload excerpt of the first items."""
    out = []
    for d in services.analysis.describe_messages(role, plan, PREVIEW_ROWS):
        excerpt = d.payload_excerpt[:PAYLOAD_EXCERPT].decode("utf-8", "replace")
        if d.encryption_keys is not None:
            # An encrypted payload is never shown, not even as replacement characters.
            excerpt = f"(encrypted with {', '.join(d.encryption_keys)})"
        elif d.chunks:
            excerpt += f" (chunked message, {d.chunks} chunks)"
        out.append(
            {
                "id": d.message_id.triplet(),
                "partition": d.topic_partition,
                "key": d.key,
                "publishTime": format_time_ms(d.publish_time_ms),
                "deliverAt": format_time_ms(d.deliver_at_ms),
                "properties": dict(d.properties),
                "payload": excerpt
                + ("…" if d.payload_size > PAYLOAD_EXCERPT and d.encryption_keys is None else ""),
                "payloadSize": d.payload_size,
                "wholeBatchOf": d.whole_batch_of,
                "alreadyAcknowledged": d.already_acknowledged,
            }
        )
    return out


def skip_document(
    services: GatingServices,
    caller: Caller,
    arguments: GatedArguments,
    plan: SkipPlan,
    *,
    predicate: Mapping[str, Any] | None = None,
    head: HeadArguments | None = None,
) -> dict[str, Any]:
    """What the preview shows of ``plan``: the request, the exact backlog, the messages;
    a ``predicate`` it matched, or the ``head`` it is."""
    projection = services.analysis.project_backlog(caller.role, plan)
    document: dict[str, Any] = {
        "requester": caller.requester,
        "role": caller.role,
        "reason": arguments.reason,
        "ticket": arguments.ticket,
        "partitions": list(plan.partitions()),
        "backlog": {
            "before": projection.before,
            "after": projection.after,
            "perPartition": {
                p.topic_partition: {"before": p.before, "after": p.after, "ids": p.items}
                for p in projection.partitions
            },
        },
        "messages": _described(services, caller.role, plan),
        "total": len(plan),
        "totalMessages": plan.messages,
        "alreadyAcknowledged": int(plan.columns.already_acknowledged.sum()),
    }
    if predicate is not None:
        document["predicate"] = dict(predicate)
    if head is not None:
        document["head"] = {"messages": head.limit}
    return document


def skip_applied(outcome: skip.SkipOutcome) -> Applied:
    return Applied(
        SKIP,
        changed=len(outcome.skipped),
        unchanged=len(outcome.acknowledged_meanwhile) + len(outcome.already_acknowledged),
        outcome=outcome.to_pulsar_json(),
        result=outcome,
    )


def head_text(limit: int | None) -> str:
    """What a head skip chose, in words."""
    if limit is None:
        return "the whole backlog (clear-backlog), as it was at planning time"
    return (
        f"the first {int(limit)} unacknowledged message(s) of each partition (skip -n; "
        "batches count their messages)"
    )


def _short(partition: str) -> str:
    return partition.rsplit("-partition-", 1)[-1] if "-partition-" in partition else ""


def skip_preview(record: PlanRecord, content: bool = True) -> Preview:
    """A skip record's preview: the heading counts the messages that change (the ids not
    acknowledged already, a whole batch its messages), the backlog per partition as
    planned, the messages described."""
    doc = shown(record.document, content)
    columns = record.skip_plan().columns
    whole = (columns.batch_index < 0) & (columns.batch_size > 0)
    weight = np.where(whole, columns.batch_size, 1)
    already = columns.already_acknowledged
    changing, left = int(weight[~already].sum()), int(weight[already].sum())
    ids = int((~already).sum())
    heading = f"Skip {count(changing)}, {count(ids, 'id')}"
    if left:
        heading += f"; {left} already acknowledged"
    backlog = doc["backlog"]
    partitions = tuple(
        PartitionChange(
            partition,
            backlog_before=v["before"],
            backlog_after=v["after"],
            acknowledged=max(v["before"] - v["after"], 0),
            ids=v["ids"],
        )
        for partition, v in backlog["perPartition"].items()
    )
    details: list[tuple[str, str]] = []
    if doc.get("predicate") is not None:
        details.append(("Matching", predicate_text(doc["predicate"])))
    if "head" in doc:
        details.append(("Chosen as", head_text(doc["head"].get("messages"))))
    details.append(
        ("Ids named", f"{len(columns)}, {int(already.sum())} of them acknowledged already")
    )
    messages = tuple(
        MessageRow(
            id=m["id"],
            partition=_short(m["partition"]),
            note=", ".join(
                n
                for n in (
                    f"whole batch of {m['wholeBatchOf']}" if m["wholeBatchOf"] else "",
                    "already acknowledged" if m["alreadyAcknowledged"] else "",
                )
                if n
            ),
            key=m["key"],
            publish_time=time_text(m["publishTime"]),
            deliver_at=time_text(m["deliverAt"]),
            properties=m["properties"],
            payload=m["payload"],
            payload_size=m.get("payloadSize"),
        )
        for m in doc["messages"]
    )
    return Preview(
        operation=SKIP,
        heading=heading,
        topic=record.topic,
        subscription=record.subscription,
        request=request_of(record),
        partitions=partitions,
        effects=Effects(acknowledged=changing, unchanged=left),
        details=tuple(details),
        messages=messages,
        messages_not_listed=max(len(columns) - len(messages), 0),
        backlog=(backlog["before"], backlog["after"]),
    )


class _Skip(GatedOperation[SkipPlan, S]):
    """What every skip shares: the skip permission on the topic, the preview and the
    approved apply."""

    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        return skip_preview(record, content)

    def targets(self, services: GatingServices, role: str, arguments: S) -> Sequence[TopicInfo]:
        base = TopicName.parse(arguments.topic).base
        return (services.access.authorized_topic(role, Operation.SKIP, base),)

    def apply_approved(
        self, services: GatingServices, plan: SkipPlan, approval: Approval
    ) -> Applied:
        # A head's planning wrote "head" into the document, which the digest covers.
        head = "head" in approval.record.document
        return skip_applied(apply_approved_skip(services, plan, approval, any_type=head))


class SkipMessagesOperation(_Skip[SkipMessages]):
    def plan(
        self, services: GatingServices, caller: Caller, arguments: SkipMessages
    ) -> Planned[SkipPlan]:
        name = TopicName.parse(arguments.topic)
        plan = plan_skip(services, caller.role, name.base, arguments.subscription, arguments.ids)
        if name.is_partition:
            plan.check_only_on(str(name))
        return Planned(plan, skip_document(services, caller, arguments, plan))

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: SkipMessages
    ) -> Applied:
        return skip_applied(
            skip_messages(
                services,
                caller.role,
                arguments.topic,
                arguments.subscription,
                arguments.ids,
                via=caller.via,
            )
        )


class SkipMatchingOperation(_Skip[SkipMatching]):
    def plan(
        self, services: GatingServices, caller: Caller, arguments: SkipMatching
    ) -> Planned[SkipPlan]:
        plan = plan_skip(
            services, caller.role, arguments.topic, arguments.subscription, arguments.matches
        )
        document = skip_document(services, caller, arguments, plan, predicate=arguments.predicate)
        if arguments.request is not None:
            document["request"] = arguments.request
        return Planned(plan, document)

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: SkipMatching
    ) -> Applied:
        outcome = skip_messages(
            services,
            caller.role,
            arguments.topic,
            arguments.subscription,
            arguments.matches,
            via=caller.via,
        )
        return skip_applied(outcome)


class SkipHeadOperation(_Skip[HeadArguments]):
    """``skip -n`` (:class:`SkipHead`) and ``clear-backlog`` (:class:`ClearBacklog`)."""

    def plan(
        self, services: GatingServices, caller: Caller, arguments: HeadArguments
    ) -> Planned[SkipPlan]:
        plan = plan_skip_head(
            services, caller.role, arguments.topic, arguments.subscription, arguments.limit
        )
        if not len(plan):
            raise InvalidArgumentError(
                f"Subscription {arguments.subscription} of {arguments.topic} has no backlog: "
                "nothing to skip"
            )
        return Planned(plan, skip_document(services, caller, arguments, plan, head=arguments))

    def apply_now(
        self, services: GatingServices, caller: Caller, arguments: HeadArguments
    ) -> Applied:
        outcome = skip_head(
            services,
            caller.role,
            arguments.topic,
            arguments.subscription,
            arguments.limit,
            via=caller.via,
        )
        return skip_applied(outcome)


def _skip(cls: type[_S], name: str, arguments: type[GatedArguments], workflow: str) -> _S:
    return cls(name, SKIP, SkipPlan, arguments, workflow, step="skip", title="Skip messages")


SKIP_MESSAGES = _skip(
    SkipMessagesOperation, "skip-messages", SkipMessages, "cursorops_skip_messages"
)
SKIP_MATCHING = _skip(
    SkipMatchingOperation, "skip-matching", SkipMatching, "cursorops_skip_matching"
)
SKIP_HEAD = _skip(SkipHeadOperation, "skip-head", SkipHead, "cursorops_skip_head")
CLEAR_BACKLOG = _skip(SkipHeadOperation, "clear-backlog", ClearBacklog, "cursorops_skip_head")


__all__ = [
    "BATCHED_UP_TO",
    "CLEAR_BACKLOG",
    "FOLD_AFTER_DELTAS",
    "SKIPS_PER_BATCH",
    "SKIP_HEAD",
    "SKIP_MATCHING",
    "SKIP_MESSAGES",
    "ClearBacklog",
    "HeadArguments",
    "SkipHead",
    "SkipMatching",
    "SkipMessages",
    "SkipWrites",
    "ValidatedSkip",
    "apply_skip",
    "head_text",
    "plan_skip",
    "plan_skip_head",
    "skip_document",
    "skip_head",
    "skip_messages",
    "skip_preview",
    "skip_writes",
    "validate_skip",
    "write_skips",
]
