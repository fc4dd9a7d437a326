"""A command line builds its own command's parser only; help and errors still name all."""

from __future__ import annotations

import argparse

import pytest

from cursorops.cli import main as cli_main
from cursorops.cli.lazy_parsers import add_lazy_parser


def _topics(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    topics = commands.choices["topics"]
    return next(a for a in topics._actions if isinstance(a, argparse._SubParsersAction))


def test_only_the_named_command_s_parser_is_built() -> None:
    parser = cli_main.build_parser()
    topics = _topics(parser)
    total = topics.choices.pending()  # type: ignore[attr-defined]
    assert total > 20
    args = parser.parse_args(["topics", "stats", "acme/ops/orders"])
    assert args.topic == "acme/ops/orders" and args.operation.command == ("topics", "stats")
    assert topics.choices.pending() == total - 1  # type: ignore[attr-defined]


def test_an_alias_and_its_name_share_one_parser() -> None:
    parser = argparse.ArgumentParser(prog="tool")
    words = parser.add_subparsers(dest="word", required=True)
    built: list[str] = []

    def build(p: argparse.ArgumentParser) -> None:
        built.append(p.prog)
        p.add_argument("--size", type=int, default=1)

    add_lazy_parser(words, "unsubscribe", help="h", aliases=["unsub"], parents=[], build=build)
    with pytest.raises(argparse.ArgumentError, match="conflicting subparser: unsub"):
        add_lazy_parser(words, "other", help="h", aliases=["unsub"], parents=[], build=build)
    assert parser.parse_args(["unsub", "--size", "3"]).size == 3
    assert parser.parse_args(["unsubscribe"]).size == 1
    assert built == ["tool unsubscribe"]
    assert words.choices["unsub"] is words.choices["unsubscribe"]


def test_help_and_a_wrong_word_name_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli_main.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["topics", "--help"])
    listed = capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args(["topics", "nope"])
    refused = capsys.readouterr().err
    for word in ("stats", "skip-messages", "analyze-backlog", "reset-cursor"):
        assert word in listed and repr(word) in refused
