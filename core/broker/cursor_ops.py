"""Skip, by message id or the head of the backlog: plan, apply, apply an approved plan."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cursorops.core.acks.cursor import CursorState
from cursorops.core.acks.ledger_layout import LedgerLayout
from cursorops.core.authz import Operation
from cursorops.core.broker.combining import Combiner
from cursorops.core.broker.context import BrokerContext, Collaborator
from cursorops.core.broker.skip_write import ValidatedSkip, write_skips
from cursorops.core.errors import (
    InvalidArgumentError,
    InvalidSkipPlanError,
    TopicNotFoundError,
    UnsupportedSubscriptionTypeError,
)
from cursorops.core.gating.operation import Approval
from cursorops.core.ids.chunked_messages import ChunkedMessages
from cursorops.core.ids.message_id import MessageId
from cursorops.core.ids.topic_name import TopicName
from cursorops.core.skipping import skip
from cursorops.core.skipping.chunk_ids import whole_chunked_messages
from cursorops.core.skipping.head import head_messages
from cursorops.core.skipping.skip_plan import SkipColumns, SkipPlan
from cursorops.core.store.metadata import TopicInfo
from cursorops.core.store.read_view import ReadView
from cursorops.core.store.values import SegmentInfo

SKIPS_PER_BATCH = 64
"""At most this many skips of one subscription, queued while another was being written,
are written together in one transaction (:mod:`cursorops.core.broker.combining`)."""
BATCHED_UP_TO = 1_000
"""Skips of at most this many messages are written in batches (so a batch writes at most
64,000); a larger one is written alone, waiting only for the cursor locks it takes."""


@dataclass(frozen=True)
class _Partitions:
    """What :meth:`CursorOperations._read` read of a topic's partitions."""

    owners: Mapping[int, tuple[str, int]]
    """Each ledger of the topic: (partition name, partition index or -1)."""
    layouts: Mapping[str, LedgerLayout]
    facts: Mapping[str, skip.SkipLookup]
    states: Mapping[str, CursorState]


@dataclass(frozen=True)
class _Listed:
    """What :meth:`CursorOperations._list` read in a metadata transaction (owners and
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


class CursorOperations(Collaborator):
    """The operations that move a subscription's cursor on an operator's request."""

    def __init__(self, context: BrokerContext) -> None:
        super().__init__(context)
        self._batches: Combiner[tuple[str, str], ValidatedSkip, skip.SkipOutcome] = Combiner(
            self._write_batch, max_batch=SKIPS_PER_BATCH
        )

    def skip_messages(
        self,
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
        validated = self.validate_skip(role, topic, subscription, ids, via=via)
        if len(validated.items) > BATCHED_UP_TO:
            return self._write(validated)
        # Skips of this subscription that wait for the same cursors are written together.
        key = (validated.info.name, subscription)
        return self._batches.submit(key, frozenset(validated.layouts), validated)

    def validate_skip(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        ids: Sequence[MessageId],
        *,
        via: str = "broker",
    ) -> ValidatedSkip:
        """What :meth:`skip_messages` writes, validated as it validates it: nothing written."""
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        # One read transaction authorizes, then lists what validates the ids (files: after).
        with self.metadata.reading() as view:
            info = self.access.authorized_topic_in(
                view, role, Operation.SKIP, name.base if name.is_partition else name
            )
            self.access.refuse_without_approval(info, "skips")
            if not ids:
                raise InvalidArgumentError("No message ids given")
            asked = skip.IdArrays.of(ids)
            listed = self._list(view, info, subscription, _partitions_of(asked), any_type=False)
        selection, layouts = self._validate(asked, listed, subscription, with_states=False)
        plan = SkipPlan(info.name, subscription, selection.columns, self.clock())
        if name.is_partition:
            plan.check_only_on(str(name))
        # The plan was validated a moment ago by this call: validating it again would only
        # read the same ledger lists, which no cursor lock protects either. What is still
        # unacknowledged is decided under the locks, once: what is acknowledged there was
        # acknowledged before this call (nothing came "meanwhile").
        rows = np.arange(len(plan.columns), dtype=np.int64)
        return ValidatedSkip(role, info, plan, plan.columns, rows, layouts, via, planned_now=True)

    def plan_skip(
        self,
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
        info = self.access.authorized_topic(role, Operation.SKIP, topic)
        if not ids:
            raise InvalidArgumentError("No message ids given")
        selection, _ = self._validated_skip(
            info, subscription, skip.IdArrays.of(ids), with_states=True
        )
        return SkipPlan(info.name, subscription, selection.columns, self.clock())

    def plan_skip_head(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        limit: int | None,
    ) -> SkipPlan:
        """The first ``limit`` unacknowledged messages of each partition (``skip -n``), or all of
        them (``limit`` None: ``clear-backlog``), as a skip plan to preview, approve and apply.

        Messages are counted, not entries (:mod:`cursorops.core.skipping.head`): a batch of 100
        is 100 messages, a chunked message one (all its chunks taken, or none).
        Each partition skips its own ``limit``, as pulsar-admin's
        ``skip -n`` does on a partitioned topic; a partition's name limits it to that one.
        Any subscription type may skip its head, as in Pulsar.
        """
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        info = self.access.authorized_topic(
            role, Operation.SKIP, name.base if name.is_partition else name
        )
        return self._head(info, name, subscription, limit)[0]

    def skip_head(
        self,
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
        info = self.access.authorized_topic(
            role, Operation.SKIP, name.base if name.is_partition else name
        )
        self.access.refuse_without_approval(info, "skips", "the cursorops_skip_head workflow")
        plan, layouts = self._head(info, name, subscription, limit)
        rows = np.arange(len(plan.columns), dtype=np.int64)
        return self._write(ValidatedSkip(role, info, plan, plan.columns, rows, layouts, via))

    def _head(
        self, info: TopicInfo, name: TopicName, subscription: str, limit: int | None
    ) -> tuple[SkipPlan, Mapping[str, LedgerLayout]]:
        """The head's skip plan, and the layouts of the partitions it read (one read)."""
        if limit is not None and (isinstance(limit, bool) or limit < 1):
            raise InvalidArgumentError(f"Invalid number of messages {limit!r}: expected 1 or more")
        chosen = [str(name)] if name.is_partition else info.partition_names()
        if name.is_partition and str(name) not in info.partition_names():
            raise TopicNotFoundError(
                f"Topic '{name}' not found: {info.name} has {info.partitions} partitions"
            )
        read = self._read(info, subscription, lambda _: chosen, with_states=True, any_type=True)
        heads = [
            head_messages(
                read.states[p],
                read.facts[p],
                limit,
                None if read.facts[p].chunk_rest is None else self._chunks(p),
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
        plan = SkipPlan(info.name, subscription, selection.columns, self.clock())
        return plan, {n: read.layouts[n] for n in selection.columns.names}

    def _read(
        self,
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
        with self.metadata.reading() as view:
            listed = self._list(view, info, subscription, wanted_of, any_type=any_type)
        return self._partitions(listed, subscription, with_states=with_states)

    @staticmethod
    def _list(
        view: ReadView,
        info: TopicInfo,
        subscription: str,
        wanted_of: Callable[[Mapping[int, tuple[str, int]]], Sequence[str]],
        *,
        any_type: bool,
    ) -> _Listed:
        """:meth:`_read`'s statements, in the caller's read transaction."""
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

    def _partitions(self, listed: _Listed, subscription: str, *, with_states: bool) -> _Partitions:
        """The listed partitions' entries (from the segment files) and, ``with_states``,
        cursors: read outside any metadata transaction."""
        facts = {
            name: self.context.entry_arrays(name, layout, listed.segments[name])
            for name, layout in listed.layouts.items()
        }
        states = {
            name: self.context.cursor_state(name, subscription, layout)
            if with_states
            else CursorState()
            for name, layout in listed.layouts.items()
        }
        return _Partitions(listed.owners, listed.layouts, facts, states)

    def _validated_skip(
        self,
        info: TopicInfo,
        subscription: str,
        ids: skip.IdArrays,
        *,
        with_states: bool,
        any_type: bool = False,
    ) -> tuple[skip.SkipSelection, dict[str, LedgerLayout]]:
        """:func:`cursorops.core.skipping.skip.validate` against the stores as they are now, and the
        ledger layouts of the partitions the ids are on."""
        with self.metadata.reading() as view:
            listed = self._list(view, info, subscription, _partitions_of(ids), any_type=any_type)
        return self._validate(ids, listed, subscription, with_states=with_states)

    def _validate(
        self, ids: skip.IdArrays, listed: _Listed, subscription: str, *, with_states: bool
    ) -> tuple[skip.SkipSelection, dict[str, LedgerLayout]]:
        """:meth:`_validated_skip` against what :meth:`_list` read."""
        read = self._partitions(listed, subscription, with_states=with_states)
        ids = whole_chunked_messages(ids, read.owners, read.facts, self._chunks)
        return skip.validate(ids, read.owners, read.facts, read.states), dict(read.layouts)

    def _chunks(self, partition: str) -> ChunkedMessages:
        """The partition's chunked messages (one scan of its chunk columns)."""
        return self.context.chunked_messages(partition)

    def apply_skip(
        self,
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
        record applies there (:meth:`apply_approved_skip`).
        """
        info = self.access.authorized_topic(role, Operation.SKIP, plan.topic)
        self.access.refuse_without_approval(info, "skips")
        return self._write(self._validated_plan(info, role, plan, via, None, any_type=False))

    def apply_approved_skip(
        self, plan: SkipPlan, approval: Approval, *, any_type: bool
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
        info = self.access.authorized_topic(approval.role, Operation.SKIP, plan.topic)
        validated = self._validated_plan(
            info, approval.role, plan, approval.via, approval, any_type=any_type
        )
        outside = _keys(validated.items) - _keys(plan.columns)
        if outside or len(validated.items) != len(plan):
            raise InvalidSkipPlanError(
                f"Plan {approval.digest} would acknowledge messages outside the approved set "
                f"now ({len(outside)} of them): nothing applied"
            )
        return self._write(validated)

    def _validated_plan(
        self,
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
                f"Invalid skip plan: topic '{plan.topic}' is not a canonical topic name "
                f"('{info.name}')"
            )
        columns = plan.columns
        if skip.has_repeats(columns.ledger_id, columns.entry_id, columns.batch_index):
            raise InvalidSkipPlanError(
                f"Invalid skip plan {plan.plan_id}: a message is listed twice; nothing skipped"
            )
        ids = skip.IdArrays(
            columns.ledger_id, columns.entry_id, columns.partition, columns.batch_index
        )
        selection, layouts = self._validated_skip(
            info, plan.subscription, ids, with_states=False, any_type=any_type
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

    def _write(self, validated: ValidatedSkip) -> skip.SkipOutcome:
        return write_skips(self.metadata, [validated], self.clock())[0]

    def _write_batch(
        self, _key: tuple[str, str], batch: Sequence[ValidatedSkip]
    ) -> list[skip.SkipOutcome]:
        return write_skips(self.metadata, batch, self.clock())


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
