"""What the audit knows of a topic: the backlog audit's history rows, the applied skips,
the gated requests never closed, and the poison-pill radar, now (cursorops extensions
under the topic's Pulsar path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cursorops.operations.declaration import (
    TOPIC,
    TOPIC_PATH,
    Call,
    Param,
    base_topic,
    in_range,
    operation,
)

MAX_HISTORY_ROWS = 1_000_000
"""Rows ``audit history`` shows at most (``--limit``)."""
MAX_SKIPS = 1_000_000
"""Skips ``audit skips`` lists at most (``--limit``)."""
INT64_MAX = 2**63 - 1

_ONE_SUBSCRIPTION = Param(
    "subscription",
    flags=("-s", "--subscription"),
    default=None,
    help="one subscription (default: all)",
)


# -- backlog history ----------------------------------------------------------------


def _shape_history(given: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``--since`` as epoch milliseconds (a duration is before now, here)."""
    sent = {k: v for k, v in given.items() if k != "since"}
    if given.get("since") is not None:
        from cursorops.core.domain.durations import parse_time_ms
        from cursorops.core.services.broker import wall_clock_ms

        sent["since_ms"] = parse_time_ms(given["since"], "--since", wall_clock_ms())
    return None, sent


def _history_lines(answer: list[Mapping[str, Any]], _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import format_time, theirs

    return [
        f"{format_time(s['atMs'])}  {theirs(s['subscription'])}  {s['messages']} message(s)  "
        f"{s['entries']} entr{'y' if s['entries'] == 1 else 'ies'}  oldest "
        f"{format_time(s['oldestPublishMs']) if s['oldestPublishMs'] is not None else '-'}"
        for s in answer
    ] or ["No backlog history"]


@operation(
    "audit",
    "history",
    method="GET",
    path=TOPIC_PATH + "/backlogHistory",
    params=(
        TOPIC,
        _ONE_SUBSCRIPTION,
        Param(
            "since",
            where="cli",
            flags=("--since",),
            default=None,
            help="from this time on: 1h, 2d, epoch ms or ISO-8601",
        ),
        Param("since_ms", kind=int, wire="sinceMs", default=None, cli=False),
        Param(
            "limit",
            kind=int,
            flags=("--limit",),
            default=10_000,
            help="newest rows shown (default 10000)",
        ),
    ),
    help="backlog history of TOPIC as cursorops_backlog_audit recorded it (exact counts)",
    render=_history_lines,
    shape=_shape_history,
)
def backlog_history(
    call: Call, topic: str, subscription: str | None, since_ms: int | None, limit: int
) -> list[dict[str, object]]:
    """The backlog audit's history rows of the topic (``cursorops_backlog_audit``), of one
    subscription or all, from ``sinceMs`` (epoch ms) on, the newest ``limit``, oldest
    first."""
    if since_ms is not None:
        in_range(since_ms, "sinceMs", 0, INT64_MAX)
    rows = call.broker.analysis.backlog_history(
        call.role,
        topic,
        subscription,
        since_ms=since_ms,
        limit=in_range(limit, "limit", 1, MAX_HISTORY_ROWS),
    )
    return [row.to_json() for row in rows]


# -- applied skips ------------------------------------------------------------------


def _skips_lines(answer: list[Mapping[str, Any]], _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import format_time, theirs

    return [
        f"{s['skipId']}  {format_time(s['at'])}  {theirs(s['subscription'])}  "
        f"{theirs(s['role'])}  via {theirs(s['via'] or '-')}  {s['ids']} id(s)  "
        + (f"undone (undo {s['undoId']})" if s["undoId"] is not None else "applied")
        for s in answer
    ] or ["No skips"]


@operation(
    "audit",
    "skips",
    method="GET",
    path=TOPIC_PATH + "/skips",
    params=(
        TOPIC,
        _ONE_SUBSCRIPTION,
        Param(
            "limit",
            kind=int,
            flags=("--limit",),
            default=100,
            help="newest skips shown (default 100)",
        ),
    ),
    help="applied skips of TOPIC, newest first: id, time, role, door, messages, undone",
    render=_skips_lines,
)
def applied_skips(
    call: Call, topic: str, subscription: str | None, limit: int
) -> list[dict[str, object]]:
    """The topic's applied skips, newest first, and whether each was undone (the id
    ``undoSkip`` takes)."""
    from cursorops.core.services.gating import undo_skip

    skips = undo_skip.list_skips(
        call.broker.gated,
        call.role,
        topic,
        subscription,
        limit=in_range(limit, "limit", 1, MAX_SKIPS),
    )
    return [s.to_json() for s in skips]


# -- requests never closed ------------------------------------------------------------


def _requests_lines(answer: list[dict[str, Any]], _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import open_request_lines

    return open_request_lines(answer)


@operation(
    "audit",
    "requests",
    method="GET",
    path=TOPIC_PATH + "/openRequests",
    params=(TOPIC,),
    help="gated requests of TOPIC planned and never closed (waiting, forced, failed or "
    "abandoned runs), newest first, each with its plan digest",
    render=_requests_lines,
)
def open_requests(call: Call, topic: str) -> list[dict[str, Any]]:
    """The topic's gated requests recorded as planned with no closing record, newest first:
    waiting, or forced to a state, failed or abandoned before they closed; ``applied`` says
    whether the plan record was applied all the same. Message content only for a role that
    may peek on the topic."""
    from cursorops.core.domain.content import shown

    base = base_topic(topic)
    found = call.broker.workflow.open_requests(call.role, base)
    content = call.broker.access.may_read_content(call.role, [base])
    return [shown(request.to_json(), content) for request in found]


# -- poison-pill radar ------------------------------------------------------------------


def _radar_lines(answer: list[Mapping[str, Any]], _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import theirs

    lines: list[str] = []
    for radar in answer:
        limits = radar["limits"]
        lines.append(
            f"{radar['topic']} / {theirs(radar['subscription'])}: {radar['stuck']} stuck "
            "message(s) "
            f"({radar['redelivered']} redelivered >= {limits['minRedeliveries']}, "
            f"{radar['behindAcks']} behind acknowledgements for >= "
            f"{limits['minAgeSeconds']} s)"
        )
        lines += [
            f"  {m['messageId']}  partition {m['partition']}  "
            f"key {theirs(m['key']) if m['key'] is not None else '-'}  "
            f"redelivered {m['redeliveryCount']}x  age {m['ageSeconds']} s"
            for m in radar["listed"]
        ]
    return lines or ["No subscriptions"]


@operation(
    "audit",
    "radar",
    method="GET",
    path=TOPIC_PATH + "/poisonRadar",
    params=(
        TOPIC,
        _ONE_SUBSCRIPTION,
        Param(
            "min_redeliveries",
            kind=int,
            wire="minRedeliveries",
            flags=("--min-redeliveries",),
            default=3,
            help="default 3",
        ),
        Param(
            "min_age_seconds",
            kind=int,
            wire="minAgeSeconds",
            flags=("--min-age-seconds",),
            default=600,
            help="default 600",
        ),
        Param(
            "max_listed",
            kind=int,
            wire="maxListed",
            flags=("--max-listed",),
            default=50,
            help="per subscription (default 50)",
        ),
    ),
    help="messages stuck at the head of TOPIC's subscriptions now (redelivered at least "
    "--min-redeliveries times, or older than --min-age-seconds behind a later "
    "acknowledged message), each with a prefilled skip-messages request",
    render=_radar_lines,
)
def poison_radar(
    call: Call,
    topic: str,
    subscription: str | None,
    min_redeliveries: int,
    min_age_seconds: int,
    max_listed: int,
) -> list[dict[str, object]]:
    """Messages stuck at the head of the topic's subscriptions (or one) now: redelivered
    at least ``minRedeliveries`` times, or unacknowledged for ``minAgeSeconds`` behind a
    later acknowledged message; each subscription's with a prefilled skip-messages
    request of those listed (the backlog audit runs the same radar)."""
    from cursorops.core.domain.analysis.poison_radar import MAX_LISTED, RadarLimits
    from cursorops.core.domain.ids.topic_name import TopicName

    limits = RadarLimits(
        in_range(min_redeliveries, "minRedeliveries", 1, 1_000_000),
        in_range(min_age_seconds, "minAgeSeconds", 0, 10**9),
        in_range(max_listed, "maxListed", 0, MAX_LISTED),
    )
    found = call.broker.analysis.poison_radar(
        call.role, TopicName.parse(topic), subscription, limits
    )
    return [radar.to_json() for radar in found]
