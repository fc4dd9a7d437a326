"""The run conf of a skip by predicate (``cursorops_skip_matching``), through pydantic.

The options are ``spark_apps/find_messages.py``'s, in the glossary's words:
``key``, ``property`` (``NAME=VALUE``, all must hold), ``publish_time_after`` /
``publish_time_before``, ``still_scheduled`` (delayed messages not yet due:
skipping them cancels them), ``deliver_at_after`` / ``deliver_at_before``,
``payload_contains``, ``producer`` (the producer's name, exactly), or a whole
``predicate`` document. ``everything`` matches every unacknowledged message: a
gated clear-backlog. Every given condition must hold. The document is built by
core's :func:`~core.predicates.predicate_from_options` and checked with core's
parser (bad input fails the run at once), then handed to the Spark job as one
JSON document.

A match count above ``limit`` (default 1,000,000) is refused unless
``allow_large`` is set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from airflow_glue.request import validate_conf
from core.errors import InvalidPredicateError

DEFAULT_LIMIT = 1_000_000
EVERYTHING = {"publishTime": {"after": 0}}
"""The predicate of ``everything``: published at or after the epoch, i.e. every message."""


class MatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    topic: str = Field(min_length=1)
    subscription: str = Field(min_length=1)
    key: str | None = None
    property: list[str] = Field(default_factory=list)
    publish_time_after: str | None = None
    publish_time_before: str | None = None
    still_scheduled: bool = False
    deliver_at_after: str | None = None
    deliver_at_before: str | None = None
    payload_contains: str | None = None
    producer: str | None = None
    predicate: dict[str, Any] | None = None
    everything: bool = False
    reason: str = Field(min_length=1)
    ticket: str | None = None
    limit: int = Field(DEFAULT_LIMIT, ge=1)
    allow_large: bool = False

    @field_validator(
        "ticket",
        "key",
        "publish_time_after",
        "publish_time_before",
        "deliver_at_after",
        "deliver_at_before",
        "payload_contains",
        "producer",
        mode="before",
    )
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if value == "" else value

    def predicate_document(self) -> dict[str, Any]:
        """The predicate as find_messages takes it (``--predicate``); raises on a bad one."""
        from core.predicates import predicate_from_options

        if self.still_scheduled and self.deliver_at_after is not None:
            raise InvalidPredicateError(
                "Invalid predicate: still_scheduled and deliver_at_after both set "
                "the delivery time's start"
            )
        document = predicate_from_options(
            self.predicate,
            key=self.key,
            properties=self.property,
            publish_time_after=self.publish_time_after,
            publish_time_before=self.publish_time_before,
            deliver_at_after="now" if self.still_scheduled else self.deliver_at_after,
            deliver_at_before=self.deliver_at_before,
            payload_contains=self.payload_contains,
            producer=self.producer,
            source="predicate",
            property_option="property",
        )
        if self.everything:
            if document:
                raise InvalidPredicateError(
                    "Invalid predicate: everything matches every message; give no other condition"
                )
            document = dict(EVERYTHING)
        if not document:
            raise InvalidPredicateError(
                "Invalid predicate: give at least one condition (key, property, publish time, "
                "still_scheduled, delivery time, payload_contains, producer, predicate) "
                "or everything"
            )
        return document


def parse_match_request(conf: Mapping[str, object], now_ms: int) -> tuple[MatchRequest, str]:
    """The request and its predicate as JSON text, checked by core; one line on a problem."""
    from core.predicates import parse_predicate

    request = validate_conf(MatchRequest, conf)
    document = request.predicate_document()
    parse_predicate(document, now_ms=now_ms)
    return request, json.dumps(document, sort_keys=True)


def over_limit(matches: int, limit: int, allow_large: bool) -> str | None:
    """The refusal when ``matches`` exceeds ``limit`` without ``allow_large``, else None."""
    if matches > limit and not allow_large:
        return (
            f"The predicate matches {matches} messages, above the limit of {limit}: "
            "nothing planned; set allow_large to true (or raise limit) to go ahead"
        )
    return None
