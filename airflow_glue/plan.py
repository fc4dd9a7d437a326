"""The skip plan document: what ``plan_skip`` found, what the approver sees, what apply uses.

A plan is small JSON (XCom): the request, the validated ids per topic
partition, the exact backlog before and the projected backlog after, the
preview as Markdown, and a digest of the ids. The digest is written into the
approval's body, which Airflow stores with the approval record, so apply can
refuse a plan that differs from the one the approver saw.

Large requests belong on Spark (``spark_apps/find_messages.py`` writes skip
plans of the same ids); :func:`build_plan` is the seam: it takes the validated
items, whichever engine produced them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.broker import Broker
    from core.skip import SkipItem

PREVIEW_ROWS = 50
"""Messages listed in the preview; the rest are counted."""
PAYLOAD_EXCERPT = 60
DIGEST_LABEL = "Plan digest:"


def item_json(item: SkipItem) -> dict[str, Any]:
    mid = item.message_id
    return {
        "ledgerId": mid.ledger_id,
        "entryId": mid.entry_id,
        "partition": mid.partition,
        "batchIndex": mid.batch_index,
        "batchSize": item.batch_size,
        "deliverAt": item.deliver_at,
        "alreadyAcknowledged": item.already_acknowledged,
    }


def items_of(plan: Mapping[str, Any], partition: str) -> list[SkipItem]:
    """The plan's items of one topic partition, as core's SkipItems."""
    from core.message_id import MessageId
    from core.skip import SkipItem

    return [
        SkipItem(
            message_id=MessageId.of_store(
                i["ledgerId"], i["entryId"], i["partition"], i["batchIndex"], i["batchSize"]
            ),
            topic_partition=partition,
            batch_size=i["batchSize"],
            deliver_at=i["deliverAt"],
            already_acknowledged=i["alreadyAcknowledged"],
        )
        for i in plan["partitions"][partition]
    ]


def triplets(plan: Mapping[str, Any]) -> list[str]:
    """Every planned id as ``partition/L:E[:B]`` (the form the plan's record uses)."""
    out = []
    for partition, items in sorted(plan["partitions"].items()):
        for i in items:
            tail = f":{i['batchIndex']}" if i["batchIndex"] >= 0 else ""
            out.append(f"{partition}/{i['ledgerId']}:{i['entryId']}{tail}")
    return out


def digest(plan: Mapping[str, Any]) -> str:
    """sha256 over topic, subscription and the ids per partition (canonical JSON)."""
    core = {
        "topic": plan["topic"],
        "subscription": plan["subscription"],
        "ids": {
            p: [[i["ledgerId"], i["entryId"], i["batchIndex"]] for i in items]
            for p, items in sorted(plan["partitions"].items())
        },
    }
    text = json.dumps(core, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def digest_in(body: str | None) -> str | None:
    """The digest written in an approval body, or None."""
    for line in (body or "").splitlines():
        if DIGEST_LABEL in line:
            return line.split(DIGEST_LABEL, 1)[1].strip().strip("`* ")
    return None


def _backlog(broker: Broker, partition: str, subscription: str, items: Sequence[SkipItem]):  # type: ignore[no-untyped-def]
    """Exact backlog (messages) of one partition now, and after acknowledging ``items``."""
    from core import backlog
    from core.cursor import CursorState
    from core.ledger_layout import LedgerLayout
    from core.managed_cursor import ManagedCursor
    from core.topic_name import TopicName

    layout = LedgerLayout.of((i.ledger_id, i.entries) for i in broker.metadata.ledgers(partition))
    state = ManagedCursor.open(broker.metadata, partition, subscription, layout).state
    index = broker.ledgers.entry_index(TopicName.parse(partition))
    before = backlog.backlog(state, index.ledger_id, index.entry_id, index.batch_size)
    after_state = state.copy()
    after_state.merge(CursorState.ack_delta([i.target for i in items]), layout)
    after = backlog.backlog(after_state, index.ledger_id, index.entry_id, index.batch_size)
    return before.messages, after.messages


def _ms(value: int | None) -> str:
    if value is None or value < 0:
        return ""
    return datetime.fromtimestamp(value / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _describe(broker: Broker, partition: str, items: Sequence[SkipItem]) -> list[dict[str, Any]]:
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


def build_plan(
    broker: Broker,
    request: Mapping[str, Any],
    role: str,
    items: Sequence[SkipItem],
) -> dict[str, Any]:
    """The plan document of validated ``items`` (from ``Broker.plan_skip`` or a Spark plan)."""
    topic, subscription = request["topic"], request["subscription"]
    by_partition: dict[str, list[SkipItem]] = {}
    for item in items:
        by_partition.setdefault(item.topic_partition, []).append(item)
    stats = broker.topic_stats(role, topic)
    subs = stats["subscriptions"]
    total_before = int(subs[subscription]["msgBacklog"])  # type: ignore[index]
    per_partition = {}
    shown: list[dict[str, Any]] = []
    for partition, group in sorted(by_partition.items()):
        before, after = _backlog(broker, partition, subscription, group)
        per_partition[partition] = {"before": before, "after": after, "ids": len(group)}
        if len(shown) < PREVIEW_ROWS:
            shown.extend(_describe(broker, partition, group[: PREVIEW_ROWS - len(shown)]))
    plan: dict[str, Any] = {
        "topic": stats["topic"],
        "subscription": subscription,
        "requester": request["requester"],
        "role": role,
        "reason": request["reason"],
        "ticket": request.get("ticket"),
        "partitions": {p: [item_json(i) for i in g] for p, g in sorted(by_partition.items())},
        "backlog": {
            "before": total_before,
            "after": total_before - sum(v["before"] - v["after"] for v in per_partition.values()),
            "perPartition": per_partition,
        },
        "messages": shown,
        "total": len(items),
        "alreadyAcknowledged": sum(1 for i in items if i.already_acknowledged),
    }
    plan["digest"] = digest(plan)
    plan["preview"] = preview_markdown(plan)
    return plan


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
    lines += ["", f"{DIGEST_LABEL} `{plan['digest']}`"]
    return "\n".join(lines)
