"""What an approver reads of a gated request, rendered from its plan record only.

One layout for every operation (:class:`~cursorops.core.domain.plans.preview.Preview`), as
Markdown: the approval gates of the workflow show it, and so does the Cursors page of
the REST app. Every piece of text someone else wrote (reason, ticket, predicate, names,
keys, properties, payloads) goes through :func:`cursorops.core.services.gating.inert.inert`.
Message content (keys, properties, payload excerpts, a predicate's content conditions:
:mod:`cursorops.core.domain.content`) is shown only to a reader whose role may peek on the
plan's topics; everyone else reads its size or count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from cursorops.core.domain.content import NOT_SHOWN
from cursorops.core.domain.legible import legible
from cursorops.core.services.gating.inert import cell, inert
from cursorops.core.services.gating.operation import SKIP, UNDO_SKIP
from cursorops.core.services.gating.registry import preview_of

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.domain.plans.preview import (
        MessageRow,
        PartitionChange,
        Preview,
        PreviewRequest,
    )

DIGEST_CHARS = 64
"""A plan digest's length: the stale warning names digests whole."""
PREVIEW_ROWS = 50
"""Rows a preview table lists; the rest are counted."""


def _cell(value: object) -> str:
    return cell(value if value not in (None, {}) else "")


def subject(record: PlanRecord, ordinal: int = 1) -> str:
    """The approval's title: the preview's heading (what changes), where, who asked. Plain
    text, not Markdown: the names in it are made legible (:mod:`cursorops.core.domain.legible`), so
    a bidirectional control in a subscription's name cannot reorder the title."""
    head = (
        f"{preview_of(record).heading} on {record.topic} / {record.subscription} "
        f"(asked by {record.binding.requester})"
    )
    if record.required_approvals > 1:
        head += f": approval {ordinal} of {record.required_approvals}"
    return legible(head)


def preview_markdown(
    record: PlanRecord,
    *,
    content: bool,
    stale: str | None = None,
    approved_by: Sequence[str] = (),
) -> str:
    """What the approver reads, rendered from the stored record only, the same way for
    every operation (:class:`cursorops.core.domain.plans.preview.Preview`).

    ``content``: show keys, properties and payload excerpts (only for a reader whose role
    may peek on the plan's topics,
    :meth:`cursorops.core.services.broker.access.Access.may_read_content`);
    otherwise each says only its size or count (:func:`cursorops.core.domain.content.masked`), and
    the text says where they are. ``stale``: why the request can no longer be approved, said
    first. ``approved_by``: who approved earlier gates of the run. Every text another
    person wrote is inert; topic and partition names, which core validated (letters,
    digits, ``_ = : . -``), are code spans.
    """
    markdown = render_preview(
        record.digest, preview_of(record, content), stale=stale, approved_by=approved_by
    )
    return markdown if content else f"{markdown}\n\n{NOT_SHOWN}"


def render_preview(
    digest: str,
    preview: Preview,
    *,
    stale: str | None = None,
    approved_by: Sequence[str] = (),
) -> str:
    """A :class:`~cursorops.core.domain.plans.preview.Preview` as Markdown: the stale warning, the
    heading,
    the request, the effect, per partition, the details, the messages."""
    lines: list[str] = []
    if stale:
        # cursorops's own words with whole digests (64 hex digits, under Airflow's pane width);
        # an approver's name in them is still legible and inert.
        lines += [f"> **{STALE}** {inert(stale, 800, DIGEST_CHARS)}", ""]
    lines += [
        f"**Plan id:** `{digest}`",
        "",
        # A heading holds counts and fixed words only (core builds it): as is.
        f"### {preview.heading} on `{preview.topic}`, subscription {inert(preview.subscription)}",
        "",
        *_request(preview.request, approved_by),
        "",
        "**Effect** (exact, at planning time)",
        "",
        *_effects(preview),
    ]
    if preview.partitions:
        lines += ["", "**Per partition**", "", *_partitions(preview)]
    if preview.details:
        lines += ["", "**Details**", ""]
        lines += [
            f"- **{inert(label, 80)}:** {inert(value, 400)}" for label, value in preview.details
        ]
    if preview.messages:
        lines += ["", "**Messages**", "", *_messages(preview.messages)]
    if preview.messages_not_listed > 0:
        lines.append(
            f"\n… and {preview.messages_not_listed} more id(s), applied exactly as planned."
        )
    return "\n".join(lines)


STALE = "This request can no longer be approved: Approve is not offered, Reject closes it."


def _request(request: PreviewRequest, approved_by: Sequence[str]) -> list[str]:
    given = f"given so far by {inert(', '.join(approved_by))}" if approved_by else "none given yet"
    lines = [
        f"- **Requested by:** {inert(request.requester)} (Pulsar role {inert(request.role)})",
        f"- **Reason:** {inert(request.reason)}",
        f"- **Ticket:** {inert(request.ticket or 'none')}",
        f"- **Approvals needed:** {request.approvals_needed} (distinct people, none the "
        f"requester); {given}",
    ]
    if request.undone_skip_approvals is not None:
        had = request.undone_skip_approvals
        lines.append(
            "- **The skip it undoes was approved by:** "
            + (
                inert(", ".join(had))
                if had
                else "nobody (it was applied where no approval was required)"
            )
            + " (from that skip's audit record)"
        )
    return lines


def _effects(preview: Preview) -> list[str]:
    e = preview.effects
    if e.dropped is not None:
        return [f"- **Dropped with the subscription:** {e.dropped} message(s)"]
    lines = []
    if preview.backlog is not None:
        before, after = preview.backlog
        lines.append(f"- **Backlog:** {before} message(s) now, **{after}** after")
    lines += [
        f"- **To be acknowledged:** {e.acknowledged} message(s)",
        f"- **To be redelivered:** {e.redelivered} message(s)",
    ]
    if e.unchanged or preview.operation in (SKIP, UNDO_SKIP):
        lines.append(f"- **{e.unchanged_as.capitalize()}, left as is:** {e.unchanged} message(s)")
    return lines


def _count(value: int | None) -> str:
    return "" if value is None else str(value)


def _partition_name(name: str) -> str:
    """A partition as its table names it: ``partition-2`` (the heading names the topic), or
    a topic of its own (a redrive's dead-letter topic) whole."""
    return "partition-" + name.rsplit("-partition-", 1)[1] if "-partition-" in name else name


def _partitions(preview: Preview) -> list[str]:
    """One row per partition: before → after, and what moves on it (to be acknowledged, to
    be redelivered: the effect's words above); a column only where some partition says it.
    Short headers and names keep the table inside Airflow's pane at 1,000 px."""
    rows = preview.partitions
    columns: list[tuple[str, Callable[[PartitionChange], str]]] = [
        ("partition", lambda p: f"`{_partition_name(p.partition)}`")
    ]
    if any(p.backlog_before is not None for p in rows):
        columns.append(
            (
                "backlog",
                lambda p: (
                    f"{_count(p.backlog_before)} → "
                    + ("deleted" if p.gone else _count(p.backlog_after))
                ),
            )
        )
    if preview.moves_mark_delete:
        columns.append(
            (
                "mark-delete → next read",
                lambda p: f"{p.mark_delete_before or ''} → {p.next_read_after or ''}",
            )
        )
    if any(p.acknowledged is not None for p in rows):
        columns.append(("acknowledged", lambda p: _count(p.acknowledged)))
    if any(p.redelivered is not None for p in rows):
        columns.append(("redelivered", lambda p: _count(p.redelivered)))
    if any(p.ids is not None for p in rows):
        columns.append(("ids", lambda p: _count(p.ids)))
    out = [
        "| " + " | ".join(name for name, _ in columns) + " |",
        "| " + " | ".join("---" if n == 0 else "---:" for n in range(len(columns))) + " |",
    ]
    out += ["| " + " | ".join(show(p) for _, show in columns) + " |" for p in rows[:PREVIEW_ROWS]]
    if len(rows) > PREVIEW_ROWS:
        out.append(f"\n… and {len(rows) - PREVIEW_ROWS} more partition(s).")
    return out


def _content_cells(m: MessageRow) -> tuple[object, ...]:
    """The message content of one row (key, properties, payload), as the preview holds it
    for its reader (masked by core where the reader may not peek): the one place a
    preview renders it."""
    properties = m.properties
    pairs = (
        ", ".join(f"{k}={v}" for k, v in sorted(properties.items()))
        if isinstance(properties, Mapping)
        else properties
    )
    return (m.key, pairs, m.payload or "")


def _messages(messages: Sequence[MessageRow]) -> list[str]:
    header: tuple[str, ...]
    rows: list[tuple[object, ...]]
    if not any(m.content for m in messages):
        header = ("id", "partition")
        rows = [(m.id, m.partition) for m in messages[:PREVIEW_ROWS]]
    else:
        header = ("id", "partition", "key", "publish time", "deliver at", "properties", "payload")
        rows = []
        for m in messages[:PREVIEW_ROWS]:
            ident = m.id + (f" ({m.note})" if m.note else "")
            key, properties, payload = _content_cells(m)
            rows.append(
                (ident, m.partition, key, m.publish_time, m.deliver_at, properties, payload)
            )
    out = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
    ]
    out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return out
