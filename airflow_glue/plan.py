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

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.broker import Broker
    from core.skip_plan import SkipPlan

PREVIEW_ROWS = 50
"""Messages listed in the preview; the rest are counted."""
PAYLOAD_EXCERPT = 60
DIGEST_LABEL = "Plan id:"


def skip_plan(document: Mapping[str, Any]) -> SkipPlan:
    """The SkipPlan of a document, its id recomputed from its content (never trusted)."""
    from core.skip_plan import SkipPlan

    if "skipPlanPath" in document:
        with open(document["skipPlanPath"], encoding="utf-8") as source:
            return SkipPlan.from_json(source.read())
    return SkipPlan.from_json(document["skipPlan"])


def digest_in(body: str | None) -> str | None:
    """The plan id written in an approval body, or None."""
    for line in (body or "").splitlines():
        if DIGEST_LABEL in line:
            return line.split(DIGEST_LABEL, 1)[1].strip().strip("`* ")
    return None


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
        out.append(
            {
                "id": mid.triplet(),
                "partition": d.topic_partition,
                "key": d.key,
                "publishTime": _ms(d.publish_time_ms),
                "deliverAt": _ms(d.deliver_at_ms),
                "properties": dict(d.properties),
                "payload": excerpt + ("…" if d.payload_size > PAYLOAD_EXCERPT else ""),
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
    plan_path: str | None = None,
    predicate: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The document of ``plan``: the request, the plan, the exact backlog, the preview.

    With ``plan_path`` the plan is written there as JSON and the document
    carries the path, not the plan (large plans stay out of XCom).
    """
    projection = broker.project_backlog(role, plan)
    per_partition = {
        p.topic_partition: {"before": p.before, "after": p.after, "ids": p.items}
        for p in projection.partitions
    }
    shown = _describe(broker, role, plan, PREVIEW_ROWS)
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
            "before": projection.before,
            "after": projection.after,
            "perPartition": per_partition,
        },
        "messages": shown,
        "total": len(plan.items),
        "alreadyAcknowledged": sum(1 for i in plan.items if i.already_acknowledged),
    }
    if plan_path is None:
        document["skipPlan"] = plan.to_json()
    else:
        with open(plan_path, "w", encoding="utf-8") as out:
            out.write(plan.dumps())
        document["skipPlanPath"] = plan_path
    if predicate is not None:
        document["predicate"] = dict(predicate)
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
        *(
            [f"- **Matching:** `{json.dumps(plan['predicate'], sort_keys=True)}`"]
            if plan.get("predicate") is not None
            else []
        ),
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
