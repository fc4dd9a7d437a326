"""The backlog's exact analysis (PIP-187's ``analyzeBacklog``): Pulsar's path per
subscription, and cursorops's per topic, of one subscription or all, with the engine the
CLI picks (``--engine``). The analysis moves nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cursorops.operations.declaration import (
    SUBSCRIPTION,
    SUBSCRIPTION_PATH,
    TOPIC,
    TOPIC_PATH,
    Call,
    Param,
    in_range,
    operation,
)

INT64_MAX = 2**63 - 1
SPARK_THRESHOLD_ENTRIES = 20_000_000
"""``analyze-backlog --engine auto`` runs on Spark when the topic holds more entries.

High on purpose: on one machine the pure-Python path is faster at every size
measured (``docs/benchmarks.md``, spark_backlog); Spark pays when a cluster
shares the work or a partition's index no longer fits one process."""


def _analyses(
    call: Call, topic: str, subscription: str | None, engine: str, spark_threshold: int
) -> list[Any]:
    """Each partition's and subscription's analysis (``subscription`` None: every one); a
    partition's name gives that partition's rows only. The Spark engine runs here, in the
    broker's process, on the Spark this process's environment names."""
    from cursorops.core.domain.errors import TopicNotFoundError
    from cursorops.core.domain.ids.topic_name import TopicName

    name = TopicName.parse(topic)
    base = name.base
    if _on_spark(call, engine, spark_threshold, base):
        from cursorops.spark import analyze_backlog

        analyses = analyze_backlog.run(call.broker.config, base, subscription, role=call.role)
    else:
        analyses = call.broker.analysis.analyze_backlog(call.role, base, subscription)
    if name.is_partition:
        analyses = [row for row in analyses if row.topic_partition == str(name)]
        if not analyses:
            raise TopicNotFoundError(f"Topic '{name}' not found")
    return list(analyses)


def _on_spark(call: Call, engine: str, threshold: int, topic: Any) -> bool:
    """``engine``: spark, python, or auto (Spark above ``threshold`` entries, where
    pyspark is installed)."""
    if engine != "auto":
        return engine == "spark"
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        return False
    return bool(call.broker.analysis.entry_count(call.role, topic) > threshold)


def _analysis_lines(answer: Mapping[str, Any], _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import analysis_document_lines

    return analysis_document_lines(answer)


@operation(
    "topics",
    "analyze-backlog",
    method="GET",
    path=TOPIC_PATH + "/analyzeBacklog",
    params=(
        TOPIC,
        Param(
            "subscription",
            flags=("-s", "--subscription"),
            default=None,
            help="one subscription (default: all)",
        ),
        Param(
            "engine",
            flags=("--engine",),
            choices=("auto", "python", "spark"),
            default="auto",
            help="where to scan; auto: Spark above --spark-threshold entries (same output)",
        ),
        Param(
            "spark_threshold",
            kind=int,
            wire="sparkThreshold",
            flags=("--spark-threshold",),
            default=SPARK_THRESHOLD_ENTRIES,
            metavar="ENTRIES",
            help=f"auto uses Spark above this many entries (default {SPARK_THRESHOLD_ENTRIES:,})",
        ),
    ),
    help="PIP-187 analysis, exact and uncapped, per partition and subscription",
    render=_analysis_lines,
)
def analyze_topic_backlog(
    call: Call, topic: str, subscription: str | None, engine: str, spark_threshold: int
) -> dict[str, object]:
    """The backlog's exact analysis (PIP-187's fields) of one subscription or all, per
    partition and subscription, with each subscription's total and the total (cursorops
    extension: Pulsar's path is per subscription). ``engine``: where to scan, the
    answer is the same; Spark runs in the broker's process."""
    from cursorops.core.domain.analysis.backlog import analysis_document

    in_range(spark_threshold, "sparkThreshold", 0, INT64_MAX)
    analyses = _analyses(call, topic, subscription, engine, spark_threshold)
    return analysis_document(topic, subscription, analyses)


def _subscription_analysis(call: Call, topic: str, subscription: str) -> dict[str, Any]:
    from cursorops.core.domain.analysis.backlog import TopicAnalysis

    analyses = _analyses(call, topic, subscription, "python", 0)
    analysis = TopicAnalysis.of(topic, subscription, analyses)
    return {
        **analysis.total.to_pulsar_json(),
        "topic": topic,
        "subscription": subscription,
        "partitions": [row.to_pulsar_json() for row in analysis.partitions],
    }


@operation(
    "topics",
    "analyze-backlog",
    "subscription",
    method="GET",
    path=SUBSCRIPTION_PATH + "/analyzeBacklog",
    params=(TOPIC, SUBSCRIPTION),
    help="PIP-187 analysis of one subscription",
    cli=False,
)
def analyze_backlog(call: Call, topic: str, subscription: str) -> dict[str, Any]:
    """PIP-187's analysis, exact and uncapped; a partitioned topic's is the sum over its
    partitions, each also listed."""
    return _subscription_analysis(call, topic, subscription)


@operation(
    "topics",
    "analyze-backlog",
    "position",
    method="POST",
    path=SUBSCRIPTION_PATH + "/analyzeBacklog",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param("position", where="body", kind=dict, whole_body=True, default=None, cli=False),
    ),
    help="PIP-187 analysis of one subscription (Pulsar's POST form)",
    cli=False,
)
def analyze_backlog_post(
    call: Call, topic: str, subscription: str, position: dict[str, Any] | None
) -> dict[str, Any]:
    """Pulsar's form (POST, optional start position). The analysis always starts at the
    mark-delete position: a start position is refused (400)."""
    from cursorops.core.domain.errors import InvalidArgumentError

    if position is not None:
        raise InvalidArgumentError(
            "A start position is not supported: the analysis covers the whole backlog, "
            "from the mark-delete position"
        )
    return _subscription_analysis(call, topic, subscription)
