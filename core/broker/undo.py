"""Undo of a skip (plan, apply) and the applied skips of a topic, from the audit log."""

from __future__ import annotations

import numpy as np

from cursorops.core.acks import cursor_codec
from cursorops.core.acks.ledger_layout import LedgerLayout
from cursorops.core.acks.unacknowledge import acknowledged, unacknowledge
from cursorops.core.authz import Operation
from cursorops.core.broker.context import Collaborator
from cursorops.core.errors import (
    InvalidArgumentError,
    InvalidSkipPlanError,
    SkipAlreadyUndoneError,
    SkipNotFoundError,
)
from cursorops.core.gating.operation import Approval
from cursorops.core.ids.topic_name import TopicName
from cursorops.core.skipping.undo import (
    AppliedSkip,
    UndoOutcome,
    UndoPartition,
    UndoPlan,
    check_skip_id,
    parse_triplets,
)
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.metadata import AuditEntry, AuditRecord, TopicInfo

SKIP = "skip"
UNDO_SKIP = "undo-skip"
MAX_IDS_NAMED = 10
"""Ids an error names at most."""


class SkipUndo(Collaborator):
    """Taking a skip back: exactly the messages it acknowledged, once."""

    def list_skips(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str | None = None,
        *,
        limit: int = 100,
    ) -> list[AppliedSkip]:
        """The topic's newest ``limit`` applied skips (of one subscription), newest first, each
        with its undo when it was undone. Authorized as GET_STATS, as the audit log is."""
        info = self.access.authorized_topic(role, Operation.GET_STATS, topic)
        skips = self.metadata.audit_log(info.name, limit, kinds=(SKIP,), subscription=subscription)
        undos = _undos(self.metadata.audit_log(info.name, None, kinds=(UNDO_SKIP,)))
        listed = []
        for record in skips:
            undo = undos.get(record.id)
            skipped = record.detail.get("skipped")
            via = record.detail.get("via")
            listed.append(
                AppliedSkip(
                    skip_id=record.id,
                    at_ms=record.at_ms,
                    topic=record.topic,
                    subscription=record.subscription,
                    role=record.role,
                    via=via if isinstance(via, str) else None,
                    ids=len(skipped) if isinstance(skipped, list) else 0,
                    undone_by=None if undo is None else undo.id,
                    undone_at_ms=None if undo is None else undo.at_ms,
                )
            )
        return listed

    def plan_undo_skip(
        self, role: str, topic: str | TopicName, subscription: str, skip_id: int
    ) -> UndoPlan:
        """Plan taking back skip ``skip_id`` of ``subscription``; changes nothing.

        The skip is its ``skip`` audit record on this topic and subscription
        (SkipNotFoundError otherwise), not undone yet (SkipAlreadyUndoneError).
        Every message it acknowledged must still be on a retained ledger of the
        topic, else the whole undo is refused (InvalidArgumentError naming the
        ids). A chunked message is taken back whole: the plan names every chunk of
        each one the skip's record names. The plan counts those acknowledged now.
        Authorized as SKIP on the topic, the permission the skip needed.
        """
        plan, _ = self._plan(role, topic, subscription, skip_id)
        return plan

    def _plan(
        self,
        role: str,
        topic: str | TopicName,
        subscription: str,
        skip_id: int,
        *,
        count: bool = True,
    ) -> tuple[UndoPlan, dict[str, LedgerLayout]]:
        """The plan, and the ledger layouts of the partitions it touches. Without ``count``
        no cursor is read (an apply decides under the locks) and ``still_acknowledged`` is 0."""
        info = self.access.authorized_topic(role, Operation.SKIP, topic)
        record = self._skip_record(info, subscription, check_skip_id(skip_id))
        undone = _undos(self.metadata.audit_log(info.name, None, kinds=(UNDO_SKIP,)))
        if skip_id in undone:
            raise _already_undone(skip_id, undone[skip_id])
        skipped = record.detail.get("skipped")
        if not isinstance(skipped, list):
            raise SkipNotFoundError(f"Audit record {skip_id} lists no skipped messages")
        rows = parse_triplets(skipped, f"skip {skip_id} skipped")
        with self.metadata.reading() as view:
            view.subscription(info.name, subscription)
            ledger_lists = view.ledgers_of(info.partition_names())
        partition_names = list(ledger_lists)
        owned = sorted(
            (ledger.ledger_id, ledger.entries, code)
            for code, name in enumerate(partition_names)
            for ledger in ledger_lists[name]
        )
        known = np.array([o[0] for o in owned], dtype=np.int64)
        entries = np.array([o[1] for o in owned], dtype=np.int64)
        codes = np.array([o[2] for o in owned], dtype=np.int64)
        # Each message's partition, by its ledger (ledger ids are unique across the store).
        slot = np.minimum(np.searchsorted(known, rows[:, 0]), max(known.size - 1, 0))
        retained = (
            (known[slot] == rows[:, 0]) & (rows[:, 1] < entries[slot])
            if known.size
            else np.zeros(len(rows), dtype=np.bool_)
        )
        missing = np.flatnonzero(~retained).tolist()
        if missing:
            shown = ", ".join(str(skipped[i]) for i in missing[:MAX_IDS_NAMED])
            more = (
                f" and {len(missing) - MAX_IDS_NAMED} more" if len(missing) > MAX_IDS_NAMED else ""
            )
            raise InvalidArgumentError(
                f"Cannot undo skip {skip_id}: ledger no longer retained for {shown}{more}; "
                "nothing undone"
            )
        code_of = codes[slot] if known.size else np.zeros(0, dtype=np.int64)
        layouts = {
            name: LedgerLayout.of((i.ledger_id, i.entries) for i in ledgers)
            for name, ledgers in ledger_lists.items()
        }
        partitions = []
        still = 0
        for code, name in enumerate(partition_names):
            mine = np.flatnonzero(code_of == code)
            if not mine.size:
                continue
            part = self._whole_chunked_messages(
                UndoPartition(
                    name,
                    tuple(rows[mine, 0].tolist()),
                    tuple(rows[mine, 1].tolist()),
                    tuple(rows[mine, 2].tolist()),
                ),
                layouts[name],
            )
            partitions.append(part)
            if count:
                state = self.context.cursor_state(name, subscription, layouts[name])
                still += part.count(acknowledged(state, *part.arrays()))
        detail = record.detail
        approvers = detail.get("approvedBy")
        why = self._why(detail.get("planDigest"))
        plan = UndoPlan(
            topic=info.name,
            subscription=subscription,
            skip_id=skip_id,
            partitions=tuple(partitions),
            still_acknowledged=still,
            planned_at_ms=self.clock(),
            skipped_at_ms=record.at_ms,
            skipped_by=record.role,
            skipped_via=_text(detail.get("via")),
            reason=why.get("reason"),
            ticket=why.get("ticket"),
            approved_by=tuple(str(a) for a in approvers) if isinstance(approvers, list) else (),
        )
        return plan, {p.topic_partition: layouts[p.topic_partition] for p in partitions}

    def _whole_chunked_messages(self, part: UndoPartition, layout: LedgerLayout) -> UndoPartition:
        """``part`` and, after its messages, the other chunks of each chunked message it
        names (position order): an undo takes a chunked message back whole, whichever of
        its chunks the skip's record lists (:mod:`cursorops.core.ids.chunked_messages`); with which
        are chunks of one message, for its counts."""
        if self.context.entry_arrays(part.topic_partition, layout).chunk_rest is None:
            return part
        chunks = self.context.chunked_messages(part.topic_partition)
        ledgers, entries = chunks.whole(part.ledger_ids, part.entry_ids)
        listed = set(zip(part.ledger_ids, part.entry_ids, strict=True))
        added = [
            (ledger, entry)
            for ledger, entry in zip(ledgers.tolist(), entries.tolist(), strict=True)
            if (ledger, entry) not in listed
        ]
        ledger_ids = part.ledger_ids + tuple(a[0] for a in added)
        entry_ids = part.entry_ids + tuple(a[1] for a in added)
        return UndoPartition(
            part.topic_partition,
            ledger_ids,
            entry_ids,
            part.batch_indexes + (-1,) * len(added),
            chunks.groups(ledger_ids, entry_ids),
        )

    def _skip_record(self, info: TopicInfo, subscription: str, skip_id: int) -> AuditRecord:
        record = self.metadata.audit_record(skip_id)
        if record is None or record.topic != info.name:
            raise SkipNotFoundError(f"No skip {skip_id} on {info.name}")
        if record.kind == UNDO_SKIP:
            raise InvalidArgumentError(
                f"{skip_id} is the id of an undo (of skip {record.detail.get('skipId')}), not of "
                "a skip: an undo is not undone; skip the messages again (cursorops topics "
                "skip-messages) to acknowledge them again"
            )
        if record.kind != SKIP:
            raise SkipNotFoundError(f"No skip {skip_id} on {info.name}: it records a {record.kind}")
        if record.subscription != subscription:
            raise SkipNotFoundError(
                f"No skip {skip_id} on subscription '{subscription}' of {info.name}: it skipped "
                f"on '{record.subscription}'"
            )
        return record

    def _why(self, digest: object) -> dict[str, str]:
        """Reason and ticket of an approved skip, from its plan record."""
        if not isinstance(digest, str):
            return {}
        record = self.metadata.plans.get(digest)
        if record is None:
            return {}
        return {
            key: value
            for key in ("reason", "ticket")
            if isinstance(value := record.document.get(key), str) and value
        }

    def apply_undo_skip(self, role: str, plan: UndoPlan, *, via: str = "broker") -> UndoOutcome:
        """:meth:`_apply` at once; refused on a namespace that requires approval
        (ApprovalRequiredError): only an approved plan record applies there."""
        return self._apply(role, plan, via, None)

    def apply_approved_undo(self, plan: UndoPlan, approval: Approval) -> UndoOutcome:
        """:meth:`_apply` of an approved plan record's plan, as its requester's role, with
        the record's claim in the same transaction."""
        return self._apply(approval.role, plan, approval.via, approval)

    def _apply(self, role: str, plan: UndoPlan, via: str, approval: Approval | None) -> UndoOutcome:
        """Take back the acknowledgement of the plan's messages still acknowledged, in one
        transaction with the ``undo-skip`` audit record (and an approved plan's claim).

        The plan may be stale or forged: it is planned again from
        the audit log (authorization, the skip, not undone, every ledger retained)
        and refused unless it names the same messages. Under the cursors' row locks
        the skip is checked again for an undo committed meanwhile; each cursor is
        written as one replacing delta (:func:`cursorops.core.acks.unacknowledge.unacknowledge`):
        a later cumulative acknowledgement that passed a message moves the
        mark-delete position back before it, and keeps everything else acknowledged.
        """
        info = self.access.authorized_topic(role, Operation.SKIP, plan.topic)
        if approval is None:
            self.access.refuse_without_approval(
                info, "undo-skip", "the cursorops_undo_skip workflow"
            )
        if info.name != plan.topic:
            raise InvalidSkipPlanError(
                f"Invalid undo plan: topic '{plan.topic}' is not a canonical topic name "
                f"('{info.name}')"
            )
        again, layouts = self._plan(role, plan.topic, plan.subscription, plan.skip_id, count=False)
        if not again.same_messages(plan):
            raise InvalidSkipPlanError(
                f"Invalid undo plan {plan.plan_id}: it does not name the messages skip "
                f"{plan.skip_id} acknowledged; nothing undone"
            )
        plan_id = plan.plan_id
        parts = again.partitions
        at_ms = self.clock()
        ticket = Ticket.gated([approval.digest if approval else None], "undo-skip")
        with self.metadata.cursor_transaction() as work:
            read = work.read(info.name, plan.subscription, [p.topic_partition for p in parts])
            # Under the row locks every undo of this skip committed before is visible.
            undone = _undos(work.audit_records(info.name, (UNDO_SKIP,)))
            if plan.skip_id in undone:
                raise _already_undone(plan.skip_id, undone[plan.skip_id])
            taken: list[str] = []
            left: list[str] = []
            per_partition: dict[str, int] = {}
            for part, (cursor_id, record) in zip(parts, read, strict=True):
                layout = layouts[part.topic_partition]
                state = replay(record, layout)
                columns = part.arrays()
                acked = acknowledged(state, *columns)
                names = part.triplets()
                taken += [n for n, a in zip(names, acked.tolist(), strict=True) if a]
                left += [n for n, a in zip(names, acked.tolist(), strict=True) if not a]
                per_partition[part.topic_partition] = int(acked.sum())
                if acked.any():
                    after = unacknowledge(state, layout, *columns)
                    work.append(
                        cursor_id, [cursor_codec.encode(after, replace=True)], ticket=ticket
                    )
            extra = approval.detail() if approval is not None else {}
            detail = {
                "skipId": plan.skip_id,
                "planId": plan_id,
                "unacknowledged": taken,
                "notAcknowledged": left,
                "perPartition": per_partition,
                "via": via,
                **extra,
            }
            undo_id = work.record_audit(
                AuditEntry(UNDO_SKIP, info.name, plan.subscription, role, detail, at_ms)
            )
            if approval is not None:
                applied = approval.claim(undo_id, unacknowledged=len(taken))
                work.claim_plan(approval.digest, at_ms, applied)
        return UndoOutcome(
            topic=info.name,
            subscription=plan.subscription,
            skip_id=plan.skip_id,
            undo_id=undo_id,
            plan_id=plan_id,
            unacknowledged=tuple(taken),
            not_acknowledged=tuple(left),
            per_partition=per_partition,
        )


def _undos(records: list[AuditRecord]) -> dict[int, AuditRecord]:
    """The ``undo-skip`` records by the skip id each names."""
    found: dict[int, AuditRecord] = {}
    for record in records:
        skip_id = record.detail.get("skipId")
        if isinstance(skip_id, int) and not isinstance(skip_id, bool):
            found.setdefault(skip_id, record)
    return found


def _already_undone(skip_id: int, undo: AuditRecord) -> SkipAlreadyUndoneError:
    return SkipAlreadyUndoneError(
        f"Skip {skip_id} was undone already (undo {undo.id} by '{undo.role}'); nothing undone"
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


__all__ = ["SKIP", "UNDO_SKIP", "SkipUndo"]
