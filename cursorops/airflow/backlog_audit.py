"""The scheduled backlog audit's glue: which topics, the history rows, the thresholds.

The audit acts as the Pulsar role ``CURSOROPS_AUDIT_ROLE`` (default ``admin``,
a superuser): listing every namespace of every tenant is a superuser's or a
tenant admin's right in Pulsar. Thresholds come from the run's ``thresholds``
param, else from ``<cursorops home>/backlog-thresholds.json`` when it exists
(read inside the task, never at parse time); the format is
:mod:`cursorops.core.domain.analysis.backlog_audit`'s. Its ``radar`` object sets the poison-pill
radar's limits (:mod:`cursorops.core.domain.analysis.poison_radar`), which :func:`radar_report`
applies to every subscription of the audited topics.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cursorops.core.domain.errors import InvalidArgumentError

if TYPE_CHECKING:
    from cursorops.core.domain.analysis.backlog_audit import BacklogSample, Breach, Thresholds
    from cursorops.core.domain.analysis.poison_radar import RadarLimits
    from cursorops.core.domain.config import Config
    from cursorops.core.services.broker import Broker

AUDIT_ROLE = "CURSOROPS_AUDIT_ROLE"
THRESHOLDS_FILE = "backlog-thresholds.json"
RADAR_SUMMARY_IDS = 5
"""Message ids per subscription the radar's XCom carries (the run's radar.json has them all)."""


def audit_role(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(AUDIT_ROLE) or "admin"


def audit_topics(broker: Broker, role: str, namespaces: Iterable[str]) -> list[str]:
    """Every topic of ``namespaces`` (``tenant/ns``), or of every namespace when empty."""
    chosen = sorted(set(namespaces))
    if not chosen:
        chosen = [
            namespace
            for tenant in broker.admin.list_tenants(role)
            for namespace in broker.admin.list_namespaces(role, tenant)
        ]
    return sorted(t.name for namespace in chosen for t in broker.admin.list_topics(role, namespace))


def load_thresholds(param: Mapping[str, Any] | None, home: Path) -> Thresholds:
    """The run's thresholds, else the home's file, else none."""
    from cursorops.core.domain.analysis.backlog_audit import Thresholds

    if param:
        return Thresholds.from_json(param)
    path = home / THRESHOLDS_FILE
    if not path.exists():
        return Thresholds()
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"Invalid thresholds file {path}: {exc}") from exc
    return Thresholds.from_json(document)


def samples_from(
    analysis: Mapping[str, Any],
    ages: Mapping[str, int | None] | None,
    at_ms: int,
    run_id: str,
) -> list[BacklogSample]:
    """One sample per subscription of an analyze_backlog document (exact counts).

    ``ages`` None takes each subscription's ``oldestPublishMs`` from the document, as
    the audit job (``spark_apps/audit_backlog.py``) writes it.
    """
    from cursorops.core.domain.analysis.backlog_audit import BacklogSample

    topic = str(analysis["topic"])
    subs = analysis.get("subscriptions") or {}
    return [
        BacklogSample(
            topic,
            name,
            at_ms,
            int(counts["messages"]),
            int(counts["entries"]),
            counts.get("oldestPublishMs") if ages is None else ages.get(name),
            run_id,
        )
        for name, counts in sorted(subs.items())
    ]


def chart_selection(
    samples: Sequence[BacklogSample], breaches: Sequence[Breach], largest: int
) -> list[tuple[str, str]]:
    """The breached subscriptions, then the ``largest`` others by messages now."""
    breached = list(dict.fromkeys((b.topic, b.subscription) for b in breaches))
    rest = sorted(
        (s for s in samples if (s.topic, s.subscription) not in breached),
        key=lambda s: (-s.messages, s.topic, s.subscription),
    )
    return breached + [(s.topic, s.subscription) for s in rest[:largest]]


def radar_report(
    broker: Broker,
    role: str,
    topics: Sequence[str],
    limits: RadarLimits,
) -> dict[str, Any]:
    """The poison-pill radar over every subscription of ``topics``: one document.

    ``subscriptions`` holds every subscription with findings (each with its
    prefilled skip request); the counts cover all of them.
    """
    found = [
        radar
        for topic in topics
        for radar in broker.analysis.poison_radar(role, topic, None, limits)
    ]
    return {
        "limits": limits.to_json(),
        "subscriptions": len(found),
        "stuck": sum(r.result.stuck for r in found),
        "findings": [r.to_json() for r in found if r.result.stuck],
    }


def radar_summary(report: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The small part of :func:`radar_report` an XCom carries, and where the rest is."""
    return {
        "subscriptions": report["subscriptions"],
        "stuck": report["stuck"],
        "file": str(path),
        "withFindings": [
            {
                "topic": f["topic"],
                "subscription": f["subscription"],
                "stuck": f["stuck"],
                "messageIds": [m["messageId"] for m in f["listed"][:RADAR_SUMMARY_IDS]],
            }
            for f in report["findings"]
        ],
    }


def radar_lines(report: Mapping[str, Any]) -> list[str]:
    """The task log's lines: each finding, and the command that requests its skip. Keys are
    masked to their size: every reader of the DAG may open its task logs
    (:mod:`cursorops.core.domain.content`); the run's radar.json keeps them."""
    from cursorops.core.domain.content import masked_value

    lines = [
        f"Poison-pill radar {json.dumps(report['limits'])}: {report['stuck']} stuck message(s) "
        f"in {len(report['findings'])} of {report['subscriptions']} subscription(s)"
    ]
    for f in report["findings"]:
        lines.append(
            f"{f['topic']} / {f['subscription']}: {f['stuck']} stuck "
            f"({f['redelivered']} redelivered, {f['behindAcks']} behind acknowledgements)"
        )
        lines += [
            f"  {m['messageId']} partition {m['partition']} "
            f"key {masked_value('key', m['key']) or '-'} "
            f"redelivered {m['redeliveryCount']}x age {m['ageSeconds']} s"
            for m in f["listed"]
        ]
        request = f["skipRequest"]
        if request is None:
            lines.append(f"  no skip request: skip by id is refused on {f['type']} subscriptions")
            continue
        lines.append(f"  skip them: {request['command']}")
    return lines


def run_audit(config: Config, dag_run: Any) -> list[dict[str, Any]]:
    """The topics' documents the run's Spark job wrote in the run's scratch folder
    (:mod:`cursorops.spark.run_scratch`), found by the run's identity, never by an XCom."""
    from cursorops.spark.run_scratch import AUDIT, scratch_file

    path = scratch_file(config, dag_run.dag_id, dag_run.run_id, AUDIT)
    try:
        documents = json.loads(path.read_text(encoding="utf-8"))["topics"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidArgumentError(f"Cannot read the run's audit {path}: {exc}") from exc
    if not isinstance(documents, list) or not all(isinstance(d, dict) for d in documents):
        raise InvalidArgumentError(f"Invalid audit {path}: expected a list of documents")
    return documents
