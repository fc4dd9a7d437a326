"""Producers of one topic (or partition) as Pulsar's broker admits them: unique names and
the access modes of PIP-68, with the topic epoch.

- A producer name is taken while its producer is connected: another producer of that
  name is refused (``ProducerBusy``).
- ``Shared`` (the default) is refused while an exclusive producer holds the topic
  or one waits for it (``ProducerBusy``).
- ``Exclusive`` is admitted only when the topic has no producer at all, and fenced
  (``ProducerFenced``) otherwise, or when it reconnects with a topic epoch that
  another exclusive producer has moved past.
- ``WaitForExclusive`` waits, in order, until the topic has no producer.
- ``ExclusiveWithFencing`` takes the topic at once: the producers there are closed
  (their clients are sent ``CommandCloseProducer`` and come back fenced) and those
  waiting are refused.

Every exclusive producer that takes the topic moves its epoch on (or sets it to the
epoch a reconnecting producer brings); a producer's success answer carries it.
This state lives in the memory of the process the producers connected to, as in
Pulsar's topic object.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from cursorops.wire.commands import ProducerAccessMode, ServerError
from cursorops.wire.refusal import Refusal

K = TypeVar("K", bound=Hashable)
"""A producer's key: who holds it (a connection and its producer id)."""


@dataclass
class _Waiting(Generic[K]):
    key: K
    name: str
    admitted: asyncio.Future[int]


@dataclass
class TopicProducers(Generic[K]):
    """One topic's (or partition's) connected producers, by key (connection, producer id)."""

    names: dict[K, str] = field(default_factory=dict)
    exclusive: K | None = None
    waiting: deque[_Waiting[K]] = field(default_factory=deque)
    epoch: int | None = None
    """Pulsar's topic epoch: None until a first exclusive producer."""

    def admit(
        self, key: K, name: str, mode: ProducerAccessMode, topic_epoch: int | None
    ) -> tuple[int | None, list[K], asyncio.Future[int] | None]:
        """Admit a producer: (the epoch it gets, the producers it fences, and for one that
        must wait, what resolves with its epoch once admitted). Raises :class:`Refusal`;
        nothing changes then."""
        if name in self.names.values() or any(w.name == name for w in self.waiting):
            raise Refusal(
                ServerError.ProducerBusy, f"Producer with name '{name}' is already connected"
            )
        held = self.exclusive is not None or bool(self.waiting)
        if mode is ProducerAccessMode.Shared:
            if held:
                raise Refusal(
                    ServerError.ProducerBusy,
                    f"Topic has an existing exclusive producer: {self._exclusive_name()}",
                )
            self.names[key] = name
            return self.epoch, [], None
        if mode is ProducerAccessMode.Exclusive:
            if held:
                raise Refusal(
                    ServerError.ProducerFenced,
                    f"Topic has an existing exclusive producer: {self._exclusive_name()}",
                )
            if self.names:
                raise Refusal(ServerError.ProducerFenced, "Topic has existing shared producers")
            self._check_epoch(topic_epoch)
        elif mode is ProducerAccessMode.WaitForExclusive and (held or self.names):
            admitted: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self.waiting.append(_Waiting(key, name, admitted))
            return None, [], admitted
        fenced: list[K] = []
        if mode is ProducerAccessMode.ExclusiveWithFencing:
            fenced = list(self.names)
            for waiting in self.waiting:
                if not waiting.admitted.done():
                    waiting.admitted.set_exception(
                        Refusal(ServerError.ProducerFenced, "Fenced by an exclusive producer")
                    )
            self.waiting.clear()
            self.names.clear()
            self.exclusive = None
        return self._take(key, name, topic_epoch), fenced, None

    def remove(self, key: K) -> None:
        """A producer closed (or its connection went, or it was fenced); the next waiting
        producer takes the topic once none is left."""
        self.names.pop(key, None)
        for waiting in list(self.waiting):
            if waiting.key == key:
                self.waiting.remove(waiting)
                waiting.admitted.cancel()
        if self.exclusive == key:
            self.exclusive = None
        while self.waiting and not self.names:
            waiting = self.waiting.popleft()
            if waiting.admitted.done():
                continue
            waiting.admitted.set_result(self._take(waiting.key, waiting.name, None))

    @property
    def empty(self) -> bool:
        return not self.names and not self.waiting

    def _take(self, key: K, name: str, topic_epoch: int | None) -> int:
        self.names[key] = name
        self.exclusive = key
        if topic_epoch is not None:
            self.epoch = topic_epoch
        else:
            self.epoch = 0 if self.epoch is None else self.epoch + 1
        return self.epoch

    def _check_epoch(self, topic_epoch: int | None) -> None:
        if topic_epoch is not None and self.epoch is not None and topic_epoch < self.epoch:
            raise Refusal(
                ServerError.ProducerFenced,
                f"Topic epoch has moved on ({self.epoch}): the producer of epoch {topic_epoch}"
                " was fenced",
            )

    def _exclusive_name(self) -> str:
        if self.exclusive is not None:
            return self.names.get(self.exclusive, "")
        return self.waiting[0].name if self.waiting else ""


def access_mode(value: int) -> ProducerAccessMode:
    """The access mode a ``CommandProducer`` asks for; an unknown one is refused."""
    try:
        return ProducerAccessMode(value)
    except ValueError:
        raise Refusal(
            ServerError.NotAllowedError, f"Unknown producer access mode {value}"
        ) from None
