"""Writing validated skips: the cursors locked and read once, each skip decided in turn
against them, its acknowledgements and audit record, all in one transaction.

Every skip, from every front door, is written here: one plan alone (``skip -n``, an
approved plan, ``apply_skip``), or the skips of one subscription that queued while
another was being written (:mod:`cursorops.core.broker.combining`). A batch is the same as its
skips written one after the other: each is decided against the cursors as the skips
before it in the batch left them, and gets its own audit record (its skip id) and its
own journal delta per cursor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cursorops.core.acks import cursor_codec
from cursorops.core.acks.cursor import AckColumns, CursorState
from cursorops.core.acks.ledger_layout import LedgerLayout
from cursorops.core.gating.operation import Approval
from cursorops.core.skipping import skip
from cursorops.core.skipping.skip_plan import SkipColumns, SkipPlan
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.metadata import AuditEntry, MetadataStore, TopicInfo

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
        for name, count in zip(items.names, counts.tolist(), strict=True):
            per_partition[name] += count
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


__all__ = ["FOLD_AFTER_DELTAS", "ValidatedSkip", "write_skips"]
