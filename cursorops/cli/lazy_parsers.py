"""Subcommands whose parsers are built when named: a command line builds its own
command's parser only, not the sixty others (argparse's parsers cost most of a small
command's start-up)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

Build = Callable[[argparse.ArgumentParser], None]
"""Fills a subcommand's fresh parser: its arguments and defaults."""


class _Pending:
    """A subcommand's parser not built yet (shared by its name and aliases)."""

    def __init__(self, make: Callable[[], argparse.ArgumentParser]) -> None:
        self.make = make


class _Parsers(dict[str, Any]):
    """A subparsers action's name-to-parser map whose entries may still be pending."""

    def __getitem__(self, name: str) -> argparse.ArgumentParser:
        value = super().__getitem__(name)
        if isinstance(value, _Pending):
            pending, value = value, value.make()
            for word, entry in list(super().items()):
                if entry is pending:
                    super().__setitem__(word, value)
        return value  # type: ignore[no-any-return]

    def pending(self) -> int:
        """How many subcommands' parsers are not built yet."""
        return len({id(v) for v in super().values() if isinstance(v, _Pending)})

    def values(self) -> Any:
        return [self[name] for name in self]

    def items(self) -> Any:
        return [(name, self[name]) for name in self]


def add_lazy_parser(
    action: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str | None,
    aliases: Sequence[str],
    parents: Sequence[argparse.ArgumentParser],
    build: Build,
) -> None:
    """Add subcommand ``name`` to ``action`` as :meth:`add_parser` would (same help line,
    same aliases), building its parser with ``build`` only when a command line names it."""
    if not isinstance(action._name_parser_map, _Parsers):
        action._name_parser_map = _Parsers(action._name_parser_map)
        action.choices = action._name_parser_map
    for word in (name, *aliases):
        if word in action._name_parser_map:
            raise argparse.ArgumentError(action, f"conflicting subparser: {word}")
    action._choices_actions.append(action._ChoicesPseudoAction(name, aliases, help))
    prog = f"{action._prog_prefix} {name}"

    def make() -> argparse.ArgumentParser:
        # "resolve": a command's own flag (grant-permission's --role) takes the place of a
        # global option of the same name given after the command.
        parser = action._parser_class(prog=prog, parents=list(parents), conflict_handler="resolve")
        build(parser)
        return parser

    pending = _Pending(make)
    for word in (name, *aliases):
        dict.__setitem__(action._name_parser_map, word, pending)
