"""The skip request document: core's SkipPlan plus what the approver reads.

A small JSON document (XCom): the request (requester, reason, ticket), the
serialized :class:`core.skip_plan.SkipPlan`, the exact backlog before and the
projected backlog after, per partition and in total, and the preview as
Markdown. The plan's content-derived id is written into the approval's body,
which Airflow stores with the approval record; apply recomputes the id from
the plan it is about to apply and refuses a plan other than the one approved.

Large requests belong on Spark (``spark_apps/find_messages.py`` writes skip
plans of the same shape); :func:`build_document` is the seam: it takes a
SkipPlan, whichever engine produced it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.broker import Broker
    from core.skip_plan import PlannedSkip, SkipPlan

PREVIEW_ROWS = 50
"""Messages listed in the preview; the rest are counted."""
PAYLOAD_EXCERPT = 60
DIGEST_LABEL = "Plan id:"


def skip_plan(document: Mapping[str, Any]) -> SkipPlan:
    """The SkipPlan of a document, its id recomputed from its content (never trusted)."""
    from core.skip_plan import SkipPlan

    return SkipPlan.from_json(document["skipPlan"])


def digest_in(body: str | None) -> str | None:
    """The plan id written in an approval body, or None."""
    for line in (body or "").splitlines():
        if DIGEST_LABEL in line:
            return line.split(DIGEST_LABEL, 1)[1].strip().strip("`* ")
    return None


def _backlog(
    broker: Broker, partition: str, subscription: str, items: Sequence[PlannedSkip]
) -> tuple[int, int]:
    """Exact backlog (messages) of one partition now, and after acknowledging ``items``."""
    from core import backlog
    from core.cursor import AckTarget, CursorState
    from core.ledger_layout import LedgerLayout
    from core.managed_cursor import ManagedCursor
    from core.position import Position
    from core.topic_name import TopicName

    layout = LedgerLayout.of((i.ledger_id, i.entries) for i in broker.metadata.ledgers(partition))
    state = ManagedCursor.open(broker.metadata, partition, subscription, layout).state
    index = broker.ledgers.entry_index(TopicName.parse(partition))
    before = backlog.backlog(state, index.ledger_id, index.entry_id, index.batch_size)
    targets = [
        AckTarget(Position(i.ledger_id, i.entry_id), i.batch_index, i.batch_size) for i in items
    ]
    after_state = state.copy()
    after_state.merge(CursorState.ack_delta(targets), layout)
    after = backlog.backlog(after_state, index.ledger_id, index.entry_id, index.batch_size)
    return before.messages, after.messages


def _ms(value: int | None) -> str:
    if value is None or value < 0:
        return ""
    return datetime.fromtimestamp(value / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _describe(broker: Broker, partition: str, items: Sequence[PlannedSkip]) -> list[dict[str, Any]]:
    """Key, publish time, deliver-at, properties and a payload excerpt of each item."""
    from core.topic_name import TopicName

    table = broker.ledgers.read_entries(
        TopicName.parse(partition), [i.message_id.position for i in items]
    )
    rows: dict[tuple[int, int, int], dict[str, Any]] = {}
    for row in table.to_pylist():
        rows.setdefault((row["ledger_id"], row["entry_id"], row["batch_index"]), row)
        rows.setdefault((row["ledger_id"], row["entry_id"], -2), row)
    out = []
    for item in items:
        mid = item.message_id
        row = rows.get((mid.ledger_id, mid.entry_id, mid.batch_index)) or rows.get(
            (mid.ledger_id, mid.entry_id, -2), {}
        )
        payload = bytes(row.get("payload") or b"")
        excerpt = payload[:PAYLOAD_EXCERPT].decode("utf-8", "replace")
        out.append(
            {
                "id": f"{mid.ledger_id}:{mid.entry_id}"
                + (f":{mid.batch_index}" if mid.batch_index >= 0 else ""),
                "partition": partition,
                "key": row.get("key"),
                "publishTime": _ms(row.get("publish_time")),
                "deliverAt": _ms(item.deliver_at),
                "properties": dict(row.get("properties") or []),
                "payload": excerpt + ("…" if len(payload) > PAYLOAD_EXCERPT else ""),
                "wholeBatchOf": item.batch_size if mid.batch_index < 0 and item.batch_size else 0,
                "alreadyAcknowledged": item.already_acknowledged,
            }
        )
    return out


def build_document(
    broker: Broker, request: Mapping[str, Any], role: str, plan: SkipPlan
) -> dict[str, Any]:
    """The document of ``plan``: the request, the plan, the exact backlog, the preview."""
    stats = broker.topic_stats(role, plan.topic)
    subs = stats["subscriptions"]
    total_before = int(subs[plan.subscription]["msgBacklog"])  # type: ignore[index]
    per_partition = {}
    shown: list[dict[str, Any]] = []
    for partition in plan.partitions():
        group = [i for i in plan.items if i.topic_partition == partition]
        before, after = _backlog(broker, partition, plan.subscription, group)
        per_partition[partition] = {"before": before, "after": after, "ids": len(group)}
        if len(shown) < PREVIEW_ROWS:
            shown.extend(_describe(broker, partition, group[: PREVIEW_ROWS - len(shown)]))
    document: dict[str, Any] = {
        "planId": plan.plan_id,
        "topic": plan.topic,
        "subscription": plan.subscription,
        "requester": request["requester"],
        "role": role,
        "reason": request["reason"],
        "ticket": request.get("ticket"),
        "partitions": list(plan.partitions()),
        "backlog": {
            "before": total_before,
            "after": total_before - sum(v["before"] - v["after"] for v in per_partition.values()),
            "perPartition": per_partition,
        },
        "messages": shown,
        "total": len(plan.items),
        "alreadyAcknowledged": sum(1 for i in plan.items if i.already_acknowledged),
        "skipPlan": plan.to_json(),
    }
    document["preview"] = preview_markdown(document)
    return document


def _cell(value: object) -> str:
    return str(value if value not in (None, {}) else "").replace("|", "\\|").replace("\n", " ")


def preview_markdown(plan: Mapping[str, Any]) -> str:
    """What the approver reads: counts, backlog before and after, the messages, the digest."""
    b = plan["backlog"]
    lines = [
        f"### Skip {plan['total']} message id(s) on `{plan['topic']}`, "
        f"subscription `{plan['subscription']}`",
        "",
        f"- **Requested by:** {plan['requester']} (Pulsar role `{plan['role']}`)",
        f"- **Reason:** {plan['reason']}",
        f"- **Ticket:** {plan.get('ticket') or 'none'}",
        f"- **Backlog:** {b['before']} message(s) now, **{b['after']}** after the skip "
        f"(exact, at planning time)",
        f"- **Already acknowledged, left as is:** {plan['alreadyAcknowledged']}",
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
    for m in plan["messages"]:
        ident = m["id"] + (f" (whole batch of {m['wholeBatchOf']})" if m["wholeBatchOf"] else "")
        if m["alreadyAcknowledged"]:
            ident += " (already acknowledged)"
        lines.append(
            "| "
            + " | ".join(
                _cell(v)
                for v in (
                    ident,
                    m["partition"],
                    m["key"],
                    m["publishTime"],
                    m["deliverAt"],
                    ", ".join(f"{k}={v}" for k, v in sorted(m["properties"].items())),
                    m["payload"],
                )
            )
            + " |"
        )
    hidden = plan["total"] - len(plan["messages"])
    if hidden > 0:
        lines.append(f"\n… and {hidden} more id(s), applied exactly as planned.")
    lines += ["", f"{DIGEST_LABEL} `{plan['planId']}`"]
    return "\n".join(lines)
