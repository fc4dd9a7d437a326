"""The plan of a skip run: stored as a plan record, previewed from that record only.

The planning task builds the preview document (the request, the exact backlog
before and after per partition, the first messages described) and stores it
with core's :class:`~core.skipping.skip_plan.SkipPlan` as a
:class:`~core.skipping.plan_record.PlanRecord`
bound to the run, the requester and the target (:func:`save_plan`). Only a
small summary with the record's digest travels as the task's XCom, and nothing
downstream trusts it: the gate renders the approver's text from the record
(:func:`preview_markdown`), and apply loads the record by the run.

Every piece of text the approver reads that someone else wrote (reason,
ticket, predicate, names, keys, properties, payloads) goes through
:func:`airflow_glue.inert.inert`. Payload excerpts are kept in the record but
shown only where the reader's role may peek (the Cursors page); Airflow's
approval page, which any Airflow user may open, shows them masked.

Large requests belong on Spark (``spark_apps/find_messages.py`` writes skip
plans of the same shape); :func:`build_document` is the seam: it takes a
SkipPlan, whichever engine produced it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_glue.inert import inert
from core.skipping.plan_record import REDRIVE, RESET_CURSOR, SKIP, UNDO_SKIP, UNSUBSCRIBE

if TYPE_CHECKING:
    from core.broker import Broker
    from core.skipping.plan_record import GatedPlan, PlanRecord
    from core.skipping.skip_plan import SkipPlan

PREVIEW_ROWS = 50
"""Messages listed in the preview; the rest are counted."""
PAYLOAD_EXCERPT = 60
MASKED = "masked (peek permission needed: see the Cursors page)"


def _ms(value: int | None) -> str:
    if value is None or value < 0:
        return ""
    return datetime.fromtimestamp(value / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _describe(broker: Broker, role: str, plan: SkipPlan, limit: int) -> list[dict[str, Any]]:
    """Key, publish time, deliver-at, properties and a payload excerpt of the first items."""
    out = []
    for d in broker.describe_messages(role, plan, limit):
        mid = d.message_id
        excerpt = d.payload_excerpt[:PAYLOAD_EXCERPT].decode("utf-8", "replace")
        if d.encryption_keys is not None:
            # An encrypted payload is never shown, not even as replacement characters.
            excerpt = f"(encrypted with {', '.join(d.encryption_keys)})"
        elif d.chunks:
            excerpt += f" (chunked message, {d.chunks} chunks)"
        out.append(
            {
                "id": mid.triplet(),
                "partition": d.topic_partition,
                "key": d.key,
                "publishTime": _ms(d.publish_time_ms),
                "deliverAt": _ms(d.deliver_at_ms),
                "properties": dict(d.properties),
                "payload": excerpt
                + ("…" if d.payload_size > PAYLOAD_EXCERPT and d.encryption_keys is None else ""),
                "payloadSize": d.payload_size,
                "wholeBatchOf": d.whole_batch_of,
                "alreadyAcknowledged": d.already_acknowledged,
            }
        )
    return out


def build_document(
    broker: Broker,
    request: Mapping[str, Any],
    role: str,
    plan: SkipPlan,
    *,
    predicate: Mapping[str, Any] | None = None,
    head: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the preview shows of ``plan``: the request, the exact backlog, the messages.

    ``head``: the plan is the head of the backlog (``{"messages": N}``, N None for
    clear-backlog); apply then accepts any subscription type, as Pulsar's skip does."""
    from core.skipping.plan_record import messages_of

    projection = broker.project_backlog(role, plan)
    per_partition = {
        p.topic_partition: {"before": p.before, "after": p.after, "ids": p.items}
        for p in projection.partitions
    }
    document: dict[str, Any] = {
        "requester": request["requester"],
        "role": role,
        "reason": request["reason"],
        "ticket": request.get("ticket"),
        "partitions": list(plan.partitions()),
        "backlog": {
            "before": projection.before,
            "after": projection.after,
            "perPartition": per_partition,
        },
        "messages": _describe(broker, role, plan, PREVIEW_ROWS),
        "total": len(plan.items),
        "totalMessages": messages_of(plan),
        "alreadyAcknowledged": sum(1 for i in plan.items if i.already_acknowledged),
    }
    if predicate is not None:
        document["predicate"] = dict(predicate)
    if head is not None:
        document["head"] = {"messages": head.get("messages")}
    return document


def save_plan(
    broker: Broker, context: Mapping[str, Any], plan: SkipPlan, document: Mapping[str, Any]
) -> dict[str, Any]:
    """Store skip ``plan`` as the run's current plan record; the summary the task returns."""
    return save_gated_plan(broker, context, SKIP, plan, document)


def summary(record: PlanRecord) -> dict[str, Any]:
    """The record's digest and counts: what the planning task returns (XCom, untrusted)."""
    out = {
        "planDigest": record.digest,
        "operation": record.operation,
        "topic": record.topic,
        "subscription": record.subscription,
        "messages": record.messages,
        "requiredApprovals": record.required_approvals,
    }
    if record.operation == SKIP:
        out |= {"ids": len(record.skip_plan()), "backlog": record.document["backlog"]}
    return out


def gated_document(
    request: Mapping[str, Any], role: str, preview: Mapping[str, Any]
) -> dict[str, Any]:
    """The preview document of an operation other than skip: who asked, why, and the
    plan's own ``preview()`` (which core built from the stores, not from the request)."""
    return {
        "requester": request["requester"],
        "role": role,
        "reason": request["reason"],
        "ticket": request.get("ticket"),
        "preview": dict(preview),
    }


def save_gated_plan(
    broker: Broker,
    context: Mapping[str, Any],
    operation: str,
    plan: GatedPlan,
    document: Mapping[str, Any],
) -> dict[str, Any]:
    """Store ``plan`` of ``operation`` as the run's current plan record; the task's summary."""
    from airflow_glue.environment import pulsar_role
    from core.skipping.plan_record import PlanBinding

    dag_run = context["dag_run"]
    requester = dag_run.triggering_user_name or ""
    binding = PlanBinding(
        dag_run.dag_id, dag_run.run_id, requester, pulsar_role(requester), operation
    )
    return summary(broker.save_plan_record(binding, plan, document))


def _cell(value: object) -> str:
    return inert(value if value not in (None, {}) else "", 200)


TITLES = {
    UNDO_SKIP: "Undo skip",
    REDRIVE: "Redrive",
    RESET_CURSOR: "Reset cursor",
    UNSUBSCRIBE: "Unsubscribe",
}


def subject(record: PlanRecord, ordinal: int = 1) -> str:
    """The approval's title: messages counted as messages (a whole batch counts its size)."""
    b = record.binding
    if record.operation != SKIP:
        head = (
            f"{TITLES.get(record.operation, record.operation)}: {record.messages} message(s) "
            f"on {record.topic} / {record.subscription} (asked by {b.requester})"
        )
        if record.required_approvals > 1:
            head += f": approval {ordinal} of {record.required_approvals}"
        return head
    ids = len(record.skip_plan())
    head = (
        f"Skip {record.messages} message(s) ({ids} id(s)) on {record.topic} / "
        f"{record.subscription} (asked by {b.requester})"
    )
    if record.required_approvals > 1:
        head += f": approval {ordinal} of {record.required_approvals}"
    return head


def _head_text(head: Mapping[str, Any]) -> str:
    count = head.get("messages")
    if count is None:
        return "the whole backlog (clear-backlog), as it was at planning time"
    return (
        f"the first {int(count)} unacknowledged message(s) of each partition (skip -n; "
        "batches count their messages)"
    )


def preview_markdown(record: PlanRecord, *, payloads: bool) -> str:
    """What the approver reads, rendered from the stored record only.

    ``payloads``: show payload excerpts (only for a reader whose role may peek on the
    topic); otherwise they are masked. Every text another person wrote is inert; topic
    and partition names, which core validated (letters, digits, ``_ = : . -``), are
    code spans.
    """
    if record.operation != SKIP:
        return _gated_markdown(record)
    doc = record.document
    b = doc["backlog"]
    binding = record.binding
    lines = [
        f"**Plan id:** `{record.digest}`",
        "",
        f"### Skip {record.messages} message(s), {doc['total']} id(s), on "
        f"`{record.topic}`, subscription {inert(record.subscription)}",
        "",
        f"- **Requested by:** {inert(binding.requester)} (Pulsar role {inert(binding.role)})",
        f"- **Reason:** {inert(doc['reason'])}",
        f"- **Ticket:** {inert(doc.get('ticket') or 'none')}",
        *(
            [f"- **Matching:** {inert(json.dumps(doc['predicate'], sort_keys=True))}"]
            if doc.get("predicate") is not None
            else []
        ),
        *([f"- **Chosen as:** {_head_text(doc['head'])}"] if "head" in doc else []),
        f"- **Backlog:** {b['before']} message(s) now, **{b['after']}** after the skip "
        f"(exact, at planning time)",
        f"- **Already acknowledged, left as is:** {doc['alreadyAcknowledged']} id(s)",
        f"- **Approvals needed:** {record.required_approvals} (distinct people, none the "
        "requester)",
        "",
        "| partition | ids | backlog before | backlog after |",
        "| --- | ---: | ---: | ---: |",
    ]
    for partition, v in b["perPartition"].items():
        lines.append(f"| `{partition}` | {v['ids']} | {v['before']} | {v['after']} |")
    lines += [
        "",
        "| id | partition | key | publish time | deliver at | properties | payload |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in doc["messages"]:
        ident = m["id"] + (f" (whole batch of {m['wholeBatchOf']})" if m["wholeBatchOf"] else "")
        if m["alreadyAcknowledged"]:
            ident += " (already acknowledged)"
        payload = m["payload"] if payloads else f"{m.get('payloadSize', '?')} bytes, {MASKED}"
        cells = (
            ident,
            m["partition"].rsplit("-partition-", 1)[-1] if "-partition-" in m["partition"] else "",
            m["key"],
            m["publishTime"],
            m["deliverAt"],
            ", ".join(f"{k}={v}" for k, v in sorted(m["properties"].items())),
            payload,
        )
        lines.append("| " + " | ".join(_cell(v) for v in cells) + " |")
    hidden = doc["total"] - len(doc["messages"])
    if hidden > 0:
        lines.append(f"\n… and {hidden} more id(s), applied exactly as planned.")
    return "\n".join(lines)


SHOWN_ABOVE = frozenset({"topic", "subscription", "planId"})
ROW_NAMES = frozenset({"partition", "messageId", "id"})
"""Preview keys the heading and the plan id already show."""


def _words(key: str) -> str:
    """``skippedAt`` → ``skipped at``: a preview key as the approver reads it."""
    out = "".join(f" {c.lower()}" if c.isupper() else c for c in key)
    return out.strip().replace("_", " ")


def _readable(key: str, value: object) -> str:
    """A preview value as text: times in UTC, lists and mappings spelled out."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if (
        isinstance(value, int)
        and value > 10**11
        and (key.endswith(("At", "Ms", "Time")) or "time" in key.lower())
    ):
        return _ms(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_readable(str(k), v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_readable(key, v) for v in value)
    return "" if value is None else str(value)


def _gated_markdown(record: PlanRecord) -> str:
    """An operation other than skip: the request, then its plan's preview, every value
    inert (scalars as a list, lists of rows as tables of at most :data:`PREVIEW_ROWS`)."""
    doc = record.document
    binding = record.binding
    preview = doc.get("preview") or {}
    lines = [
        f"**Plan id:** `{record.digest}`",
        "",
        f"### {TITLES.get(record.operation, record.operation)}: {record.messages} message(s) "
        f"on `{record.topic}`, subscription {inert(record.subscription)}",
        "",
        f"- **Requested by:** {inert(binding.requester)} (Pulsar role {inert(binding.role)})",
        f"- **Reason:** {inert(doc.get('reason'))}",
        f"- **Ticket:** {inert(doc.get('ticket') or 'none')}",
        f"- **Approvals needed:** {record.required_approvals} (distinct people, none the "
        "requester)",
    ]
    tables = []
    for key in sorted(preview):
        value = preview[key]
        if key in SHOWN_ABOVE or value in (None, "", [], {}):
            continue
        if isinstance(value, list) and all(isinstance(v, Mapping) for v in value):
            tables.append((key, value))
        else:
            lines.append(f"- **{inert(_words(key), 80)}:** {inert(_readable(key, value), 400)}")
    for key, rows in tables:
        # The stored document's keys are sorted: what names a row goes first.
        found = list(dict.fromkeys(k for row in rows for k in row))
        columns = sorted(found, key=lambda c: c not in ROW_NAMES)[:8]
        lines += [
            "",
            f"**{inert(_words(key), 80)}**",
            "",
            "| " + " | ".join(inert(_words(c), 40) for c in columns) + " |",
            "| " + " | ".join("---" for _ in columns) + " |",
        ]
        for row in rows[:PREVIEW_ROWS]:
            cells = (_readable(c, row.get(c)) for c in columns)
            lines.append("| " + " | ".join(inert(v, 200) for v in cells) + " |")
        if len(rows) > PREVIEW_ROWS:
            lines.append(f"\n… and {len(rows) - PREVIEW_ROWS} more, applied exactly as planned.")
    return "\n".join(lines)
