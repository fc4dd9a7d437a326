"""The answer to ``CommandGetTopicsOfNamespace``: a namespace's topics for a regex or
multi-topic consumer, as Pulsar's broker lists them.

A partitioned topic is listed as its partitions (each is a topic of its own to the
client). The pattern is matched by the broker when it is short enough
(Pulsar's ``subscriptionPatternMaxLength``), against the topic's name without its
domain and partition suffix, in full; otherwise, or when it is no valid
expression here, the list goes unfiltered and the client filters it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.wire.commands import TopicsMode
from cursorops.wire.frames import crc32c

MAX_PATTERN_CHARS = 50
"""Pulsar's ``subscriptionPatternMaxLength``: longer patterns are left to the client."""


@dataclass(frozen=True)
class TopicList:
    topics: list[str]
    filtered: bool
    hash: str


def _domain_removed(text: str) -> str:
    return text.split("://", 1)[1] if "://" in text else text


def topic_list(
    partitions: Iterable[str], mode: TopicsMode, pattern: str | None = None
) -> TopicList:
    """The names of ``mode`` among ``partitions`` (each non-partitioned topic and each
    partition of a partitioned one), sorted, filtered by ``pattern`` where the broker
    evaluates it."""
    wanted = {
        TopicsMode.PERSISTENT: ("persistent",),
        TopicsMode.NON_PERSISTENT: ("non-persistent",),
        TopicsMode.ALL: ("persistent", "non-persistent"),
    }[mode]
    names = sorted(name for name in partitions if TopicName.parse(name).domain in wanted)
    compiled = None
    if pattern is not None and len(pattern) <= MAX_PATTERN_CHARS:
        try:
            compiled = re.compile(_domain_removed(pattern))
        except re.error:
            compiled = None
    if compiled is not None:
        names = [
            name
            for name in names
            if compiled.fullmatch(_domain_removed(str(TopicName.parse(name).base)))
        ]
    return TopicList(names, compiled is not None, topics_hash(names))


def topics_hash(names: Iterable[str]) -> str:
    """A digest of the sorted names (CRC32C, hex): the client sends it back, and an
    unchanged list is answered without the names."""
    return f"{crc32c(','.join(sorted(names)).encode()):08x}"
