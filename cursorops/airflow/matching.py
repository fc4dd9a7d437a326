"""The run conf of a skip by predicate (``cursorops_skip_matching``), through pydantic.

:data:`MatchRequest` is the request: :class:`MatchRequestBase` (topic,
subscription, reason, ticket, the limit and the DAG's own conveniences) plus
one field per match option of :data:`cursorops.core.domain.analysis.match_conditions.MATCH_OPTIONS`
(``key``, ``property`` as ``NAME=VALUE``, all must hold, ``publish_time_after``
/ ``publish_time_before``, ``deliver_at_after`` / ``deliver_at_before``,
``payload_contains``, ``producer``), generated from core's one declaration of
the match conditions; the DAG's params are generated from :data:`MatchRequest`
(:func:`match_params`). Besides them: ``still_scheduled`` (delayed messages not
yet due: skipping them cancels them), a whole ``predicate`` document, and
``everything``, which matches every unacknowledged message: a gated
clear-backlog. Every given condition must hold. The document is built by
core's :func:`~cursorops.core.domain.analysis.match_conditions.predicate_from_options` and checked
with core's parser (bad input fails the run at once), then handed to the Spark job
as one JSON document.

A match count above ``limit`` (default 1,000,000) is refused unless
``allow_large`` is set.

The checked request is stored as the run's request record (:func:`request_record`), and
from then on the run reads it from the store by its own identity only. The scan's
answer is read back from the run's scratch folder, and it is accepted only when its
summary names that record (:func:`scan_answer`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from cursorops.core.domain.analysis.match_conditions import (
    MATCH_OPTIONS,
    MatchOption,
    predicate_from_options,
)
from cursorops.core.domain.errors import InvalidArgumentError, InvalidPredicateError

if TYPE_CHECKING:
    import pyarrow as pa

    from cursorops.core.domain.config import Config
    from cursorops.core.domain.plans.request_record import RequestRecord

Request = TypeVar("Request", bound=BaseModel)
OPERATION = "skip-matching"
"""The gated operation a run of ``cursorops_skip_matching`` asks for."""

DEFAULT_LIMIT = 1_000_000
EVERYTHING = {"publishTime": {"after": 0}}
"""The predicate of ``everything``: published at or after the epoch, i.e. every message."""
STILL_SCHEDULED = "deliver_at_after"
"""The match option ``still_scheduled`` sets (to ``now``)."""
BLANK_IS_NONE = frozenset({"ticket", *(o.name for o in MATCH_OPTIONS if o.kind != "pairs")})
"""Fields where an empty text (an untouched field of the trigger form) means: not given."""


def validate_conf(model: type[Request], conf: Mapping[str, object]) -> Request:
    """A run's conf through ``model``; a problem is one line naming the first field at fault."""
    try:
        return model.model_validate(dict(conf))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "conf"
        raise InvalidArgumentError(
            f"Invalid skip request: {where}: {first['msg']}"
            + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
        ) from exc


def conf_params(model: type[BaseModel], first: Sequence[str] = ()) -> dict[str, Any]:
    """One Airflow ``Param`` per field of ``model`` (the trigger form's fields), ``first``
    first: the field's JSON type, its description, its bounds and default (a required text
    defaults to empty, which ``model`` refuses with one line when the run starts)."""
    from airflow.sdk import Param

    schema = model.model_json_schema()["properties"]
    last = [name for name in ("reason", "ticket") if name in model.model_fields]
    order = [*first, *(name for name in model.model_fields if name not in (*first, *last)), *last]
    params = {}
    for name in order:
        field, spec = model.model_fields[name], schema[name]
        types = [t["type"] for t in spec["anyOf"]] if "anyOf" in spec else [spec["type"]]
        nullable = "null" in types
        types = [t for t in types if t != "null"]
        kept = {k: spec[k] for k in ("description", "items", "minimum", "maximum") if k in spec}
        default = field.get_default(call_default_factory=True)
        if field.is_required():
            default = "" if types == ["string"] else None
        params[name] = Param(default, type=["null", *types] if nullable else types[0], **kept)
    return params


class MatchRequestBase(BaseModel):
    """What a skip by predicate asks besides the match options, which :data:`MatchRequest`
    adds."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    topic: str = Field(min_length=1, description="Topic, e.g. persistent://acme/orders/x")
    subscription: str = Field(min_length=1, description="Subscription (Shared or Key_Shared)")
    still_scheduled: bool = Field(
        False, description="Delayed messages not yet due (skipping them cancels them)"
    )
    predicate: dict[str, Any] | None = Field(
        None,
        description='Or a predicate document, e.g. {"jsonField": {"path": "order.id", '
        '"equals": 42}} (spark_apps/README.md)',
    )
    everything: bool = Field(False, description="Every unacknowledged message: clear the backlog")
    reason: str = Field(min_length=1, description="Why (required; recorded)")
    ticket: str | None = Field(None, description="Change ticket (optional)")
    limit: int = Field(DEFAULT_LIMIT, ge=1, description="Refuse more matches than this")
    allow_large: bool = Field(False, description="Go ahead above the limit")

    @model_validator(mode="before")
    @classmethod
    def _blank_is_none(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {k: None if k in BLANK_IS_NONE and v == "" else v for k, v in data.items()}
        return data

    def options(self) -> dict[str, Any]:
        """The match options as given, by name (None or no pairs: not given)."""
        return {option.name: getattr(self, option.name) for option in MATCH_OPTIONS}

    def predicate_document(self) -> dict[str, Any]:
        """The predicate as find_messages takes it (``--predicate``); raises on a bad one."""
        options = self.options()
        if self.still_scheduled:
            if options[STILL_SCHEDULED] is not None:
                raise InvalidPredicateError(
                    f"Invalid predicate: still_scheduled and {STILL_SCHEDULED} both set "
                    "the delivery time's start"
                )
            options[STILL_SCHEDULED] = "now"
        document = predicate_from_options(
            self.predicate, source="predicate", property_option="property", **options
        )
        if self.everything:
            if document:
                raise InvalidPredicateError(
                    "Invalid predicate: everything matches every message; give no other condition"
                )
            document = dict(EVERYTHING)
        if not document:
            conditions = [o.name for o in MATCH_OPTIONS] + ["still_scheduled", "predicate"]
            raise InvalidPredicateError(
                f"Invalid predicate: give at least one condition ({', '.join(conditions)}) "
                "or everything"
            )
        return document


def _option_field(option: MatchOption) -> Any:
    """A match option's field: its type and default (pydantic's ``(type, FieldInfo)``)."""
    if option.kind == "pairs":
        return list[str], Field(default_factory=list, description=option.help)
    return str | None, Field(None, description=option.help)


_OPTION_FIELDS: dict[str, Any] = {option.name: _option_field(option) for option in MATCH_OPTIONS}
MatchRequest = create_model(
    "MatchRequest", __base__=MatchRequestBase, __module__=__name__, **_OPTION_FIELDS
)
"""The run conf of ``cursorops_skip_matching``: :class:`MatchRequestBase` and one field
per match option."""


def match_params() -> dict[str, Any]:
    """The DAG's params: one per field of :data:`MatchRequest`, topic and subscription
    first, then the match options."""
    return conf_params(
        MatchRequest, first=("topic", "subscription", *(o.name for o in MATCH_OPTIONS))
    )


def parse_match_request(conf: Mapping[str, object], now_ms: int) -> tuple[MatchRequestBase, str]:
    """The request and its predicate as JSON text, checked by core; one line on a problem."""
    from cursorops.core.domain.analysis.predicates import parse_predicate

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


def request_record(
    request: MatchRequestBase,
    predicate: str,
    *,
    dag_id: str,
    run_id: str,
    requester: str,
    role: str,
    now_ms: int,
) -> RequestRecord:
    """The run's request record of a checked request and its predicate (JSON text)."""
    from cursorops.core.domain.plans.request_record import RequestRecord

    return RequestRecord.create(
        operation=OPERATION,
        dag_id=dag_id,
        run_id=run_id,
        requester=requester,
        role=role,
        topic=request.topic,
        subscription=request.subscription,
        arguments={
            "predicate": json.loads(predicate),
            "reason": request.reason,
            "ticket": request.ticket,
            "limit": request.limit,
            "allowLarge": request.allow_large,
        },
        created_at_ms=now_ms,
    )


def scan_answer(config: Config, record: RequestRecord) -> tuple[dict[str, Any], pa.Table]:
    """The summary and the match list the run's scan wrote in the run's scratch folder,
    refused (NotAuthorizedError) unless the summary names ``record`` and its topic, and the
    list holds only rows of the record's subscription: an answer written for another
    request is never planned."""
    from cursorops.core.domain.errors import NotAuthorizedError
    from cursorops.core.domain.ids.topic_name import TopicName
    from cursorops.spark.match_list import read_match_list
    from cursorops.spark.run_scratch import MATCH_LIST, SUMMARY, scratch_file

    path = scratch_file(config, record.dag_id, record.run_id, SUMMARY)
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"Cannot read the scan's summary {path}: {exc}") from exc
    if not isinstance(found, dict) or found.get("request") != record.digest:
        named = found.get("request") if isinstance(found, dict) else None
        raise NotAuthorizedError(
            f"The scan's summary names request {named!r}, not this run's request "
            f"{record.digest}: nothing planned"
        )
    wanted = (str(TopicName.parse(record.topic)), record.subscription)
    if (found.get("topic"), found.get("subscription")) != wanted:
        raise NotAuthorizedError(
            "The scan's summary is of another topic or subscription than the run's request: "
            "nothing planned"
        )
    matches = read_match_list(str(scratch_file(config, record.dag_id, record.run_id, MATCH_LIST)))
    subscriptions = set(matches.column("subscription").to_pylist()) if matches.num_rows else set()
    if subscriptions - {record.subscription}:
        raise NotAuthorizedError(
            "The match list holds rows of another subscription than the run's request: "
            "nothing planned"
        )
    counted = found.get("matches")
    if isinstance(counted, bool) or not isinstance(counted, int):
        raise InvalidArgumentError("Invalid scan summary: no count of matches")
    return found, matches
