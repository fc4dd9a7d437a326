"""One declaration per admin operation: its command, its Pulsar v2 path, its flags, its
service call and how it reads to people.

The doors are generated from these declarations, so an operation is written once:

- :mod:`cursorops.rest.operations` adds one FastAPI route per operation (path, query,
  body and header parameters from :class:`Param`, the caller and the Broker from the
  app's dependencies) that calls the operation's service function;
- :mod:`cursorops.cli.commands` adds one argparse subcommand per operation, which
  sends the request to a broker's admin REST (the home's own standalone, or
  ``--admin-url``) and prints the answer with the operation's renderer.

This module and the operation modules import only the standard library at import
time (the CLI imports them on every command): the core is imported inside the
service functions, which only the REST app calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.gating import Caller, RunStarter

Where = Literal["path", "query", "body", "header", "cli"]
"""Where a value travels; ``cli``: a value only the command takes (a flag), which the
operation's :attr:`Operation.shape` turns into the request's values on the client."""
REQUIRED: Any = ...
"""A parameter without a default: the CLI and the route both require it."""


@dataclass(frozen=True)
class Param:
    """One value an operation takes, the same on every door.

    ``name`` is the service function's keyword and the CLI's destination; ``wire``
    the path segment, query parameter, body field or header it travels as (default:
    ``name``). ``flags`` are the CLI's option strings (none: a positional argument).
    ``kind`` is ``str``, ``int``, ``bool`` (a CLI switch), ``list`` (a repeatable
    CLI option, a JSON array in the body), ``dict`` (a JSON object in the body) or
    ``object`` (any JSON value, the whole body). ``segments`` splits one CLI value into
    several path segments (a topic name into tenant, namespace and topic): see
    :data:`TOPIC` and :data:`NAMESPACE`.
    """

    name: str
    where: Where = "query"
    kind: type = str
    flags: tuple[str, ...] = ()
    wire: str | None = None
    default: Any = REQUIRED
    help: str = ""
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    segments: Segments | None = None
    negation: tuple[str, ...] = ()
    """For a ``bool``: the CLI flags that set it false; with ``flags`` they form a required
    choice (``--enable`` / ``--disable``)."""
    cli: bool = True
    """False: a REST-only field (Pulsar's, with its default), not a CLI flag."""
    whole_body: bool = False
    """The parameter is the request body itself (a JSON array or a bare value), not a field."""
    limit: int | None = None
    """The longest a string or list may be (the route refuses longer ones with 400)."""
    repeat: bool = False
    """For a ``list``: the CLI flag takes several values and may be repeated
    (``--message-id A B --message-id C``) instead of one comma-separated value."""
    raw: bool = False
    """The command line's exact bytes, UTF-8 or not (a payload): not refused as text; the
    operation's :attr:`Operation.shape` encodes them for the request."""
    group: str | None = None
    """The CLI's mutually exclusive group the flag belongs to (one of its flags at most);
    the group is required when its members are declared required, each flag then being
    None when absent."""
    sent_as: Callable[[Any, Mapping[str, Any]], Mapping[str, Any]] | None = None
    """A CLI-only value: the request fields (wire names, in ``where``) the CLI sends for it,
    given it and the command's other values; None values are not sent. The route has no
    parameter of its own for it: the fields it fills are other (``cli=False``) params."""

    @property
    def wire_name(self) -> str:
        return self.wire or self.name

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class Segments:
    """A value the CLI takes whole and the path carries as several segments."""

    names: tuple[str, ...]
    split: Callable[[str], tuple[str, ...]]
    """The CLI's value → the path segments (raises InvalidArgumentError when it names none)."""
    join: Callable[..., Any]
    """The path segments → the value the service takes (raises on an invalid name)."""


@dataclass(frozen=True)
class Call:
    """What a service function is called with besides its parameters: the Broker and
    who calls (their Pulsar role, and how a gated request's run starts)."""

    broker: Broker
    caller: Caller
    runs: RunStarter
    reason: str = ""
    ticket: str | None = None

    @property
    def role(self) -> str:
        return self.caller.role


@dataclass(frozen=True)
class Reply:
    """An answer whose status and headers the service decides (a plain return answers
    with the operation's status). ``document`` None answers with no body."""

    document: Any = None
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


Renderer = Callable[[Any, Mapping[str, Any]], list[str]]
"""The answer (the REST document, None for 204) and the command's values → text lines."""
Documenter = Callable[[Any, Mapping[str, Any]], object]
"""The answer and the command's values → the JSON document the CLI prints."""
Shaper = Callable[[dict[str, Any]], tuple[str | None, dict[str, Any]]]
"""The command's values → the operation whose route carries the request (its name; None:
this one) and the values of that operation's parameters."""


@dataclass(frozen=True)
class Operation:
    """One admin operation (see the module's docstring)."""

    command: tuple[str, ...]
    """The CLI's words: ``("topics", "delete")``."""
    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    service: Callable[..., Any]
    params: tuple[Param, ...] = ()
    help: str = ""
    description: str = ""
    render: Renderer | None = None
    document: Documenter | None = None
    status: int = 200
    """The success status when the service returns a document (None answers 204; a GET
    answers JSON ``null``, as Pulsar's policy reads do). A
    service of a 204 operation may return its outcome all the same: the route gives it
    (200) to a client that prefers it (``Prefer: return=representation``, as the CLI
    sends), and answers 204 to the others, Pulsar's clients among them."""
    gated: bool = False
    """A cursor-moving operation: the request may wait for approval (202)."""
    responses: Mapping[int, str] = field(default_factory=dict)
    """Statuses besides the error families, for the API's description."""
    aliases: tuple[str, ...] = ()
    """Other names of the last CLI word (Pulsar's older spellings)."""
    shape: Shaper | None = None
    """Runs on the client before the request is sent: reads what the command names (a
    file, stdin), parses what Pulsar's request takes parsed (a time, a message id) and
    picks the route (:data:`Shaper`). The route validates what arrives all the same."""
    cli: bool = True
    """False: a route only, with no command of its own (another command's
    :attr:`shape` sends its requests there)."""
    closed_body: bool = False
    """Refuse a body field the operation does not declare (400), where the body's fields
    are declared one by one."""
    formats: Mapping[str, Renderer] = field(default_factory=dict)
    """Output modes besides text and json (``-o csv``, ``-o table``), for an operation that
    answers rows: each renders the answer as lines. Another command refuses them."""

    @property
    def name(self) -> str:
        return " ".join(self.command)

    def lines(self, answer: Any, values: Mapping[str, Any]) -> list[str]:
        if self.render is not None:
            return self.render(answer, values)
        if isinstance(answer, list):
            return [str(item) for item in answer]
        if answer is None:
            return []
        import json

        return json.dumps(answer, indent=2, sort_keys=True).splitlines()

    def json_document(self, answer: Any, values: Mapping[str, Any]) -> object:
        if self.document is not None:
            return self.document(answer, values)
        if answer is None and self.method != "GET":
            return {"ok": True}
        return answer  # a GET's null is the answer itself: nothing is set


_REGISTRY: dict[str, Operation] = {}


def operation(
    *command: str,
    method: Literal["GET", "POST", "PUT", "DELETE"],
    path: str,
    params: Sequence[Param] = (),
    help: str = "",
    render: Renderer | None = None,
    document: Documenter | None = None,
    status: int = 200,
    gated: bool = False,
    responses: Mapping[int, str] | None = None,
    aliases: Sequence[str] = (),
    shape: Shaper | None = None,
    cli: bool = True,
    closed_body: bool = False,
    formats: Mapping[str, Renderer] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated service function as the operation ``command``."""

    def register(service: Callable[..., Any]) -> Callable[..., Any]:
        declared = Operation(
            command=tuple(command),
            method=method,
            path=path,
            service=service,
            params=tuple(params),
            help=help,
            description=(service.__doc__ or help).strip(),
            render=render,
            document=document,
            status=status,
            gated=gated,
            responses=dict(responses or {}),
            aliases=tuple(aliases),
            shape=shape,
            cli=cli,
            closed_body=closed_body,
            formats=dict(formats or {}),
        )
        if declared.name in _REGISTRY:
            raise ValueError(f"Operation {declared.name!r} declared twice")
        _REGISTRY[declared.name] = declared
        return service

    return register


def registered() -> list[Operation]:
    """Every declared operation, in declaration order."""
    return list(_REGISTRY.values())


def named(name: str) -> Operation:
    """The declared operation ``name`` (its command's words, space-separated)."""
    return _REGISTRY[name]


# -- the checks and names most operations take --------------------------------------


def in_range(value: int, name: str, low: int, high: int) -> int:
    """``value``, refused (InvalidArgumentError) outside ``[low, high]``."""
    from cursorops.core.domain.errors import InvalidArgumentError

    if not low <= value <= high:
        raise InvalidArgumentError(f"Invalid {name} {value}: must be from {low} to {high}")
    return value


def base_topic(topic: str) -> str:
    """The topic itself, or the partitioned topic a partition belongs to."""
    from cursorops.core.domain.ids.topic_name import TopicName

    return str(TopicName.parse(topic).base)


def _split_topic(text: str) -> tuple[str, ...]:
    from cursorops.core.domain.ids.topic_name import TopicName

    name = TopicName.parse(text)
    return (name.tenant, name.namespace, name.local_name)


def _join_topic(tenant: str, namespace: str, topic: str) -> str:
    from cursorops.core.domain.ids.topic_name import TopicName

    return str(TopicName.parse(f"persistent://{tenant}/{namespace}/{topic}"))


def _split_namespace(text: str) -> tuple[str, ...]:
    from cursorops.core.domain.errors import InvalidArgumentError

    tenant, slash, namespace = text.partition("/")
    if not (tenant and slash and namespace) or "/" in namespace:
        raise InvalidArgumentError(f"Invalid namespace {text!r}: expected TENANT/NAMESPACE")
    return (tenant, namespace)


def _join_namespace(tenant: str, namespace: str) -> str:
    return f"{tenant}/{namespace}"


TOPIC = Param(
    "topic",
    where="path",
    help="persistent://TENANT/NAMESPACE/TOPIC (or TENANT/NAMESPACE/TOPIC)",
    segments=Segments(("tenant", "namespace", "topic"), _split_topic, _join_topic),
)
NAMESPACE = Param(
    "namespace",
    where="path",
    help="TENANT/NAMESPACE",
    segments=Segments(("tenant", "namespace"), _split_namespace, _join_namespace),
)
TENANT = Param("tenant", where="path", help="the tenant")
SUBSCRIPTION = Param(
    "subscription", where="path", flags=("-s", "--subscription"), help="subscription name"
)
TOPIC_PATH = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
SUBSCRIPTION_PATH = TOPIC_PATH + "/subscription/{subscription}"
