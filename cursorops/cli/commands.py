"""The CLI's admin commands, generated from the declared operations
(:mod:`cursorops.operations`), and how one runs: a request to a broker's admin REST.

A command's flags come from its operation's parameters; running it sends the request
the operation's route takes (:mod:`cursorops.rest.operations`) through a
:class:`~cursorops.cli.transport.Transport` (the home's standalone, started when none
serves it, or ``--admin-url``) and prints the answer with the operation's renderer.
An error answer becomes the error it was on the broker (the answer names its class),
so exit codes and messages are the same on every door.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from cursorops.cli.lazy_parsers import add_lazy_parser
from cursorops.cli.transport import Answer, Transport, segment
from cursorops.operations import all_operations
from cursorops.operations.declaration import Operation, Param, named

if TYPE_CHECKING:
    from cursorops.core.domain.errors import CursorOpsError

PREFER_REPRESENTATION = {"Prefer": "return=representation"}
"""The CLI prints what a request did: a 204 operation's route then answers its outcome."""


def add_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    groups: Mapping[str, argparse._SubParsersAction[argparse.ArgumentParser]],
    common: argparse.ArgumentParser,
) -> None:
    """Add a subcommand per declared operation: under its group's parser (``groups``,
    e.g. ``topics``), or at the top for a one-word command."""
    from cursorops.operations import GROUP_HELP

    known = dict(groups)
    for op in all_operations():
        if not op.cli:
            continue
        *group, word = op.command
        if group and group[0] not in known:
            known[group[0]] = commands.add_parser(
                group[0], parents=[common], help=GROUP_HELP.get(group[0], "")
            ).add_subparsers(dest="action", metavar="ACTION", required=True)
        parent = known[group[0]] if group else commands
        add_lazy_parser(
            parent,
            word,
            help=op.help,
            aliases=op.aliases,
            parents=[common],
            build=partial(_build_command, op),
        )


def _build_command(op: Operation, p: argparse.ArgumentParser) -> None:
    """Fill the parser of ``op``'s command: a flag or positional per parameter."""
    p.description = op.description
    choices: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for param in op.params:
        if not param.cli:
            continue
        if param.group is None:
            _add_param(p, param)
            continue
        if param.group not in choices:
            choices[param.group] = p.add_mutually_exclusive_group(required=param.required)
        _add_param(choices[param.group], param, optional=True)
    if op.gated and not any("--reason" in param.flags for param in op.params):
        add_approval_flags(p)
    p.set_defaults(operation=op)


def add_approval_flags(p: argparse.ArgumentParser) -> None:
    """``--reason`` and ``--ticket`` of a gated command: sent as the ``X-Cursorops-Reason``
    and ``X-Cursorops-Ticket`` headers every route reads (:attr:`Call.reason
    <cursorops.operations.declaration.Call.reason>`)."""
    p.add_argument(
        "--reason",
        help="why (recorded; required where the namespace requires approval, and the "
        "workflow started shows it to the approver)",
    )
    p.add_argument("--ticket", help="change ticket (recorded)")


def _add_param(p: Any, param: Param, *, optional: bool = False) -> None:
    if param.kind is bool and param.negation:
        choice = p.add_mutually_exclusive_group(required=param.required)
        choice.add_argument(*param.flags, dest=param.name, action="store_true", help=param.help)
        choice.add_argument(*param.negation, dest=param.name, action="store_false")
        if not param.required:
            p.set_defaults(**{param.name: param.default})
        return
    if param.kind is bool:
        p.add_argument(*param.flags, dest=param.name, action="store_true", help=param.help)
        return
    if param.kind is dict and param.flags:
        p.add_argument(
            *param.flags,
            dest=param.name,
            action="append",
            metavar=param.metavar or "KEY=VALUE",
            help=param.help,
        )
        return
    options: dict[str, Any] = {"help": param.help}
    if param.metavar:
        options["metavar"] = param.metavar
    if param.choices is not None:
        options["choices"] = param.choices
    if param.kind is int:
        options["type"] = _ascii_int
    if param.kind is list and param.repeat:
        options.update(nargs="+", action="extend")
    if not param.flags:
        p.add_argument(param.name, **options)
        return
    options["dest"] = param.name
    if optional:
        options["default"] = None if param.required else param.default
    else:
        options["required"] = param.required
        if not param.required:
            options["default"] = param.default
    p.add_argument(*param.flags, **options)


def _ascii_int(text: str) -> int:
    """An integer flag: ASCII decimal digits only (``int`` also reads "١٢" and "+5")."""
    from cursorops.cli.values import ascii_int

    return ascii_int(text)


def values_of(op: Operation, args: argparse.Namespace) -> dict[str, Any]:
    """The operation's values from the command line (a list from its comma-separated form)."""
    found: dict[str, Any] = {}
    for param in op.params:
        if not param.cli:
            continue
        from cursorops.cli.values import parse_pairs, utf8_text

        value = getattr(args, param.name)
        option = param.flags[-1] if param.flags else param.name
        if param.raw:
            pass
        elif isinstance(value, str):
            value = utf8_text(value, option)  # argv's undecodable bytes, as lone surrogates
        elif isinstance(value, list):
            value = [utf8_text(v, option) if isinstance(v, str) else v for v in value]
        if param.kind is list and not param.repeat and isinstance(value, str):
            value = [item.strip() for item in value.split(",") if item.strip()]
        if param.kind is dict and param.flags and not isinstance(value, dict):
            value = parse_pairs(value, option)
        found[param.name] = value
    return found


def request_of(op: Operation, given: Mapping[str, Any]) -> tuple[str, dict[str, str], object]:
    """The path, query and body of the operation's request for ``given`` values."""
    segments: dict[str, str] = {}
    query: dict[str, str] = {}
    body: object = None
    fields: dict[str, Any] = {}
    for param in op.params:
        if param.where == "cli" or param.name not in given:
            continue
        value = given[param.name]
        if param.sent_as is not None:
            for wire, sent in param.sent_as(value, given).items():
                if sent is None:
                    continue
                if param.where == "query":
                    query[wire] = str(sent).lower() if isinstance(sent, bool) else str(sent)
                else:
                    fields[wire] = sent
            continue
        if param.where == "path":
            if param.segments is not None:
                parts = param.segments.split(str(value))
                segments.update(zip(param.segments.names, parts, strict=True))
            else:
                segments[param.wire_name] = str(value)
        elif param.where == "query":
            if value is not None and value is not False:
                query[param.wire_name] = "true" if value is True else str(value)
        elif param.where == "body":
            if param.whole_body:
                body = value
            elif value is not None:
                fields[param.wire_name] = value
    if fields:
        body = fields
    for name, text in segments.items():
        if text in ("", ".", "..") or "/" in text:
            from cursorops.core.domain.errors import InvalidArgumentError

            # Not a name, and a URL path would change under it (``/tenants/..`` is ``/``, and
            # servers decode ``%2F`` before they match a route).
            raise InvalidArgumentError(f"Invalid {name} {text!r}: not a name")
    path = op.path.format(**{name: segment(text) for name, text in segments.items()})
    return path, query, body


def run(op: Operation, args: argparse.Namespace, transport: Transport) -> tuple[object, list[str]]:
    """Run ``op`` through ``transport``; its JSON document and its lines for people."""
    given = values_of(op, args)
    target, sent = op, given
    if op.shape is not None:
        via, sent = op.shape(dict(given))
        target = named(via) if via is not None else op
        given = {**given, **sent}
    path, query, body = request_of(target, sent)
    headers = dict(PREFER_REPRESENTATION)
    reason = getattr(args, "reason", None)
    if reason:
        from cursorops.cli.values import utf8_text
        from cursorops.core.domain.header_text import header_value

        headers["X-Cursorops-Reason"] = header_value(utf8_text(reason, "--reason"))
    ticket = getattr(args, "ticket", None)
    if ticket:
        from cursorops.cli.values import utf8_text
        from cursorops.core.domain.header_text import header_value

        headers["X-Cursorops-Ticket"] = header_value(utf8_text(ticket, "--ticket"))
    answer = transport.request(target.method, path, query=query, body=body, headers=headers)
    if answer.status >= 400:
        raise error_of(answer)
    document = answer.document()
    if answer.status == 202:
        return document, waiting_lines(document)
    render = op.formats.get(getattr(args, "output", "text"))
    lines = render(document, given) if render is not None else op.lines(document, given)
    return op.json_document(document, given), lines


def waiting_lines(answer: Mapping[str, Any]) -> list[str]:
    """What a requester reads when the namespace requires a second person's approval."""
    return [
        f"Waiting for approval: the namespace requires a second person's approval. Run "
        f"{answer['runId']} of {answer['dagId']} started; nothing changes until an "
        "approver other than you approves it.",
        f"  plan {answer.get('planDigest')} (what the approver reads, and the audit names)",
        f"  approve or reject at {answer['url']}",
    ]


def error_of(answer: Answer) -> CursorOpsError:
    """The error an error answer stands for: the class it names (cursorops's own answers
    do), else the family of its status (a proxy's or a login's answer)."""
    from cursorops.core.domain import errors

    document = answer.document()
    reason = f"HTTP {answer.status}"
    named = None
    if isinstance(document, dict):
        reason = str(document.get("reason") or document.get("detail") or reason)
        named = document.get("error")
    elif isinstance(document, str) and document.strip():
        reason = document.strip()[:300]
    kind = getattr(errors, str(named), None) if named else None
    if isinstance(kind, type) and issubclass(kind, errors.CursorOpsError):
        return kind(reason)
    family: type[errors.CursorOpsError] = {
        400: errors.InvalidArgumentError,
        401: errors.NotAuthorizedError,
        403: errors.NotAuthorizedError,
        404: errors.NotFoundError,
        409: errors.ConflictError,
        412: errors.SubscriptionBusyError,
    }.get(answer.status, errors.StoreError)
    return family(f"{reason} (HTTP {answer.status})")
