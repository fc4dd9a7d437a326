"""A gated run's plan: stored as a plan record by core, previewed from that record only.

A planning task asks core to plan the run's operation (:func:`plan_in_run`:
``Broker.plan_request``, which plans once, builds the preview document and stores
both as a :class:`~core.skipping.plan_record.PlanRecord` bound to the run, the
requester and the target). Only a small summary with the record's digest travels
as the task's XCom, and nothing downstream trusts it: the gate renders the
approver's text from the record (:func:`preview_markdown`), and apply loads the
record by the run.

Every piece of text the approver reads that someone else wrote (reason,
ticket, predicate, names, keys, properties, payloads) goes through
:func:`airflow_glue.inert.inert`. Message content (keys, properties, payload
excerpts, a predicate's content conditions: :mod:`core.content`) is kept in the
record but shown only to a reader whose role may peek on the plan's topics (the
Cursors page); everyone else reads its size or count. Airflow's approval page,
which every reader of the DAG may open, always shows it masked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_glue.inert import inert
from core.content import NOT_SHOWN, shown
from core.durations import format_time_ms
from core.gating.operation import REDRIVE, RESET_CURSOR, SKIP, UNDO_SKIP, UNSUBSCRIBE
from core.legible import legible

if TYPE_CHECKING:
    from core.broker import Broker
    from core.gating.operation import GatedArguments
    from core.skipping.plan_record import PlanRecord

PREVIEW_ROWS = 50
"""Rows a preview table lists; the rest are counted."""


def plan_in_run(
    broker: Broker, context: Mapping[str, Any], operation: str, arguments: GatedArguments
) -> dict[str, Any]:
    """Plan ``operation`` as the run's requester and store it as the run's plan record; the
    summary the planning task returns."""
    from airflow_glue.environment import pulsar_role
    from core.gating.operation import Caller, Run

    dag_run = context["dag_run"]
    requester = dag_run.triggering_user_name or ""
    caller = Caller(pulsar_role(requester), requester, via="airflow")
    run = Run(dag_run.dag_id, dag_run.run_id)
    return summary(broker.plan_request(operation, caller, arguments, run))


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


def _cell(value: object) -> str:
    return inert(value if value not in (None, {}) else "", 200)


TITLES = {
    UNDO_SKIP: "Undo skip",
    REDRIVE: "Redrive",
    RESET_CURSOR: "Reset cursor",
    UNSUBSCRIBE: "Unsubscribe",
}


def subject(record: PlanRecord, ordinal: int = 1) -> str:
    """The approval's title: messages counted as messages (a whole batch counts its size).
    Plain text, not Markdown: the names in it are made legible (:mod:`core.legible`), so a
    bidirectional control in a subscription's name cannot reorder the title."""
    if record.operation == SKIP:
        what = f"Skip {record.messages} message(s) ({len(record.skip_plan())} id(s))"
    else:
        what = f"{TITLES.get(record.operation, record.operation)}: {record.messages} message(s)"
    head = f"{what} on {record.topic} / {record.subscription} (asked by {record.binding.requester})"
    if record.required_approvals > 1:
        head += f": approval {ordinal} of {record.required_approvals}"
    return legible(head)


def _head_text(head: Mapping[str, Any]) -> str:
    count = head.get("messages")
    if count is None:
        return "the whole backlog (clear-backlog), as it was at planning time"
    return (
        f"the first {int(count)} unacknowledged message(s) of each partition (skip -n; "
        "batches count their messages)"
    )


def _pairs(properties: object) -> object:
    """A message's properties as ``name=value, ...``; a masked count as it is."""
    if isinstance(properties, Mapping):
        return ", ".join(f"{k}={v}" for k, v in sorted(properties.items()))
    return properties


def _noted(markdown: str, content: bool) -> str:
    return markdown if content else f"{markdown}\n\n{NOT_SHOWN}"


def preview_markdown(record: PlanRecord, *, content: bool) -> str:
    """What the approver reads, rendered from the stored record only.

    ``content``: show keys, properties and payload excerpts (only for a reader whose role
    may peek on the plan's topics, :meth:`core.broker.Broker.may_read_content`);
    otherwise each says only its size or count (:func:`core.content.masked`). Every text
    another person wrote is inert; topic and partition names, which core validated
    (letters, digits, ``_ = : . -``), are code spans.
    """
    if record.operation != SKIP:
        return _noted(_gated_markdown(record, content), content)
    doc = shown(record.document, content)
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
        cells = (
            ident,
            m["partition"].rsplit("-partition-", 1)[-1] if "-partition-" in m["partition"] else "",
            m["key"],
            m["publishTime"],
            m["deliverAt"],
            _pairs(m["properties"]),
            m["payload"],
        )
        lines.append("| " + " | ".join(_cell(v) for v in cells) + " |")
    hidden = doc["total"] - len(doc["messages"])
    if hidden > 0:
        lines.append(f"\n… and {hidden} more id(s), applied exactly as planned.")
    return _noted("\n".join(lines), content)


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
        return format_time_ms(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_readable(str(k), v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_readable(key, v) for v in value)
    return "" if value is None else str(value)


def _gated_markdown(record: PlanRecord, content: bool) -> str:
    """An operation other than skip: the request, then its plan's preview, every value
    inert (scalars as a list, lists of rows as tables of at most :data:`PREVIEW_ROWS`)."""
    doc = record.document
    binding = record.binding
    preview = shown(doc.get("preview") or {}, content)
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
