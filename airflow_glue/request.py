"""The run conf of a skip request, checked at the boundary with pydantic.

``message_ids`` takes pulsar-admin's forms, one id per string: a triplet
``ledgerId:entryId[:batchIndex]`` or base64 ``MessageIdData``. ``payload`` takes
the JSON bodies of PIP-423's REST endpoint (``core.skipping.skip_payload.parse_payload``). Both
may be given; the ids are the union.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.errors import InvalidArgumentError

if TYPE_CHECKING:
    from core.ids.message_id import MessageId
    from core.ids.position import Position

Request = TypeVar("Request", bound=BaseModel)


class GatedRequest(BaseModel):
    """What every gated operation's request carries besides its target: why, and a ticket.
    The trigger form lists these two last (:func:`conf_params`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    reason: str = Field(min_length=1, description="Why (required; recorded)")
    ticket: str | None = Field(default=None, description="Change ticket (optional)")

    @field_validator("ticket")
    @classmethod
    def _blank_ticket_is_none(cls, value: str | None) -> str | None:
        return value or None


class SkipRequest(GatedRequest):
    topic: str = Field(min_length=1)
    subscription: str = Field(min_length=1)
    message_ids: list[str] = Field(default_factory=list)
    payload: list[Any] | dict[str, Any] | None = None

    def ids(self) -> list[MessageId]:
        """Every id asked for, in order; raises a ``core.errors`` leaf on a bad one."""
        from core.ids.message_id import MessageId
        from core.skipping.skip_payload import parse_payload

        out = [
            MessageId.parse_triplet(text) if ":" in text else MessageId.from_base64(text)
            for text in self.message_ids
        ]
        if self.payload is not None:
            out.extend(parse_payload(self.payload))
        if not out:
            raise InvalidArgumentError("No message ids given: set message_ids or payload")
        return out


class HeadSkipRequest(GatedRequest):
    """``skip -n`` (``messages``) or ``clear-backlog`` (``messages`` empty) of a subscription."""

    topic: str = Field(
        min_length=1,
        description="Topic, or one partition of it (persistent://tenant/namespace/topic)",
    )
    subscription: str = Field(min_length=1, description="Subscription (any type)")
    messages: int | None = Field(
        default=None,
        ge=1,
        description="Skip this many messages from the head of each partition (batches count "
        "their messages); empty: clear the whole backlog",
    )


class ResetRequest(GatedRequest):
    """``reset-cursor`` to a message id (``ledgerId:entryId``) or a publish time."""

    topic: str = Field(
        min_length=1,
        description="Topic, or one partition of it (a message id needs a non-partitioned "
        "topic or a partition)",
    )
    subscription: str = Field(min_length=1, description="Subscription (any type)")
    message_id: str | None = Field(
        default=None, description="Next message to read: ledgerId:entryId (or a time below)"
    )
    time: str | None = Field(
        default=None,
        description="Or a publish time: 10m (before now), epoch ms or ISO-8601 (UTC)",
    )

    @field_validator("message_id", "time")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None

    def target(self, now_ms: int) -> tuple[Position | None, int | None]:
        """The message id's position or the time in epoch ms: exactly one of them."""
        from core.durations import parse_time_ms
        from core.ids.message_id import MessageId

        if (self.message_id is None) == (self.time is None):
            raise InvalidArgumentError("Give exactly one of message_id or time")
        if self.message_id is not None:
            return MessageId.parse_triplet(self.message_id).position, None
        return None, parse_time_ms(self.time or "", "time", now_ms)


class RedriveWorkflowRequest(GatedRequest):
    """A redrive of a subscription's dead-letter topic, to that subscription alone."""

    topic: str = Field(min_length=1, description="Topic the messages go back to (not a partition)")
    subscription: str = Field(
        min_length=1, description="The subscription that dead-lettered them (it alone sees them)"
    )
    dead_letter_topic: str | None = Field(
        default=None,
        description="The client's dead-letter topic, when its policy named one "
        "(default <topic>-<subscription>-DLQ)",
    )
    predicate: dict[str, Any] | None = Field(
        default=None, description='Only the messages it matches, e.g. {"key": "order-42"}'
    )

    @field_validator("dead_letter_topic")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None


class UndoSkipRequest(GatedRequest):
    """Undo of one applied skip: its messages unacknowledged again, nothing else."""

    topic: str = Field(min_length=1, description="Topic the skip was on")
    subscription: str = Field(min_length=1, description="Subscription the skip was on")
    skip_id: int = Field(
        ge=1,
        le=2**63 - 1,
        description="The skip's id (skip-messages prints it; cursorops audit skips lists them)",
    )


class UnsubscribeRequest(GatedRequest):
    """Unsubscribe of a subscription that still has a backlog (it is dropped with it)."""

    topic: str = Field(min_length=1, description="Topic (not a partition)")
    subscription: str = Field(min_length=1, description="Subscription to delete")
    force: bool = Field(default=False, description="Delete it even while consumers are connected")


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
    last = [name for name in GatedRequest.model_fields if name in model.model_fields]
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


def parse_request(conf: Mapping[str, object]) -> SkipRequest:
    """Validate the conf and every id in it; one line naming the first problem."""
    request = validate_conf(SkipRequest, conf)
    request.ids()
    return request
