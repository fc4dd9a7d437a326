"""The routes of the declared operations (:mod:`cursorops.operations`), one per operation.

Each route takes the operation's parameters where its :class:`~cursorops.operations.
declaration.Param` says (path segments, query, body fields or the whole body, headers),
calls the service function with the Broker and the caller this app's door injected, and
answers as Pulsar does: the document (200), nothing (204), or, for a gated operation that
waits for approval, the started run (202).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import Strict

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.services.gating import Pending
from cursorops.operations import all_operations
from cursorops.operations.declaration import Call, Operation, Param, Reply
from cursorops.rest.approval import ApprovalTextDep, waiting
from cursorops.rest.deps import BrokerDep, CallerDep, RunsDep

_FAMILIES: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid request"},
    403: {"description": "Not authorized"},
    404: {"description": "Not found"},
    503: {"description": "The stores failed"},
}
_WAITING: dict[int | str, dict[str, Any]] = {
    202: {"description": "Waiting for an approval in Airflow"}
}
_CONTEXT = ("_broker", "_caller", "_runs", "_text", "_prefer")
REPRESENTATION = "return=representation"
"""RFC 7240's preference: a 204 operation's outcome instead of no content (what the CLI
asks for; Pulsar's clients do not, and get Pulsar's 204)."""


def router() -> APIRouter:
    """A router with every declared operation's route."""
    found = APIRouter(tags=["operations"])
    for op in all_operations():
        found.add_api_route(
            op.path,
            _endpoint(op),
            methods=[op.method],
            name=op.service.__name__,
            summary=op.help,
            description=op.description,
            response_model=None,
            status_code=op.status,
            dependencies=[Depends(_closed_body(op))] if op.closed_body else None,
            responses={
                **_FAMILIES,
                **{code: {"description": text} for code, text in op.responses.items()},
                **(
                    {202: {"description": "Waiting for an approval in Airflow"}} if op.gated else {}
                ),
            },
        )
    return found


def _endpoint(op: Operation) -> Callable[..., Response]:
    def endpoint(**given: Any) -> Response:
        text = given.pop("_text")
        prefer = given.pop("_prefer") or ""
        call = Call(
            broker=given.pop("_broker"),
            caller=given.pop("_caller"),
            runs=given.pop("_runs"),
            reason=text.reason,
            ticket=text.ticket,
        )
        values = {}
        for param in op.params:
            if param.where == "cli":
                continue
            if param.segments is not None:
                values[param.name] = param.segments.join(
                    *(given.pop(name) for name in param.segments.names)
                )
            elif param.sent_as is None:
                values[param.name] = given.pop(param.name)
        answer = op.service(call, **values)
        if isinstance(answer, Pending):
            return waiting(answer)
        reply = answer if isinstance(answer, Reply) else Reply(answer, op.status)
        status, headers = reply.status, dict(reply.headers)
        if status == 204 and reply.document is not None and _prefers_outcome(prefer):
            return JSONResponse(reply.document, status_code=200, headers=headers)
        if reply.document is None and op.method == "GET":
            return JSONResponse(None, status_code=200, headers=headers)  # Pulsar's null
        if reply.document is None or status == 204:
            return Response(status_code=204, headers=headers)
        return JSONResponse(reply.document, status_code=status, headers=headers)

    endpoint.__name__ = op.service.__name__
    endpoint.__doc__ = op.description
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*_parameters(op), *_context()]
    )
    return endpoint


def _closed_body(op: Operation) -> Callable[[Request], Awaitable[None]]:
    """A dependency that refuses a body field ``op`` does not declare."""
    known = {param.wire_name for param in op.params if param.where == "body"}

    async def closed(request: Request) -> None:
        try:
            document = await request.json()
        except ValueError:
            return  # no body, or not JSON: the route's own validation answers
        if isinstance(document, dict):
            unknown = sorted(repr(str(key))[:40] for key in set(document) - known)
            if unknown:
                raise InvalidArgumentError(
                    f"Invalid request: unknown field(s) {', '.join(unknown[:10])}; the body "
                    f"takes {', '.join(sorted(known))}"
                )

    return closed


def _prefers_outcome(prefer: str) -> bool:
    return any(part.strip().lower() == REPRESENTATION for part in prefer.split(","))


def _context() -> list[inspect.Parameter]:
    prefer = Annotated[str | None, Header(alias="Prefer", max_length=256)]
    kinds = (BrokerDep, CallerDep, RunsDep, ApprovalTextDep, prefer)
    return [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=kind,
            default=None if name == "_prefer" else inspect.Parameter.empty,
        )
        for name, kind in zip(_CONTEXT, kinds, strict=True)
    ]


def _parameters(op: Operation) -> list[inspect.Parameter]:
    found: list[inspect.Parameter] = []
    bodies = [p for p in op.params if p.where == "body" and p.sent_as is None]
    for param in op.params:
        if param.where == "cli" or param.sent_as is not None:
            continue  # the CLI's own value (sent_as: it arrives as other params' fields)
        if param.segments is not None:
            found.extend(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=Annotated[str, Path(min_length=1)],
                )
                for name in param.segments.names
            )
            continue
        found.append(_parameter(param, embed=len(bodies) > 1 or not param.whole_body))
    return found


def _annotation(param: Param) -> Any:
    kind: Any = {
        str: str,
        int: int,
        bool: bool,
        list: list[str],
        dict: dict[str, Any],
        object: list[Any] | dict[str, Any],
    }[param.kind]
    if param.where == "body" and param.kind in (int, bool):
        kind = Annotated[kind, Strict()]  # a JSON number or boolean, not "1" or "true"
    if param.choices is not None:
        from typing import Literal

        kind = Literal[param.choices]
    if not param.required and param.default is None:
        kind = kind | None
    return kind


def _parameter(param: Param, *, embed: bool) -> inspect.Parameter:
    kind = _annotation(param)
    size: dict[str, Any] = {"max_length": param.limit} if param.limit is not None else {}
    where: Any
    if param.where == "path":
        where = Path(alias=param.wire_name, min_length=1 if param.kind is str else None)
    elif param.where == "query":
        where = Query(alias=param.wire_name, **size)
    elif param.where == "body":
        where = Body(embed=embed, alias=param.wire_name if embed else None, **size)
    else:
        where = Header(alias=param.wire_name, **size)
    default = inspect.Parameter.empty if param.required else param.default
    return inspect.Parameter(
        param.name,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[kind, where],
        default=default,
    )
