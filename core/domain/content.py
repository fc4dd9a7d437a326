"""Message content, and the one rule of who reads it.

A message's content is what its producer wrote into it: its key and ordering key,
its properties and its payload. Everything else a preview, an audit record or a
radar shows about a message (its id, partition, publish and delivery times, its
size, whether it is batched or acknowledged) is metadata. A condition that selects
messages by content (a predicate's ``key``, ``properties``, ``payloadContains`` and
``jsonField``'s value) is content too: it names the very values it matches.

Content is shown only to a reader whose role may peek on every topic it came from
(``PEEK_MESSAGES``, as :mod:`cursorops.core.domain.authz` decides: :func:`may_read`); everyone else
reads :func:`masked` documents, where each content field says only how much was
there (``"9 bytes, masked"``, ``"3 properties, masked"``). Airflow's approval body,
and the task logs of a workflow, which every reader of the DAG may open, always hold
the masked form. Plan records and audit records are read with GET_STATS (a
produce-only role too), so they are masked per reader; what needs CONSUME (peeking,
the poison-pill radar, a redrive's preview) is shown as it is, since every grant
that allows CONSUME allows PEEK_MESSAGES.

Pure: the permission is asked through the caller's ``authorized`` check, so this
module reads no store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import NotAuthorizedError, NotFoundError

TEXT_FIELDS = frozenset({"key", "orderingKey", "payload", "payloadContains"})
"""Fields whose value is one producer-written text (or its base64): masked to its size."""
PAIRS_FIELDS = frozenset({"properties"})
"""Fields whose value is the producer's name/value pairs: masked to their count."""
LIST_FIELDS = frozenset({"keys"})
"""Fields whose value lists keys (one per message): masked to their count."""
CONDITION_FIELDS = frozenset({"jsonField"})
"""A predicate's condition on a payload's JSON: its path stays, its value is masked."""
CONTENT_FIELDS = TEXT_FIELDS | PAIRS_FIELDS | LIST_FIELDS | CONDITION_FIELDS
SIZE_FIELD = "payloadSize"
"""A row's full payload size, when it carries one next to an excerpt (``payload``)."""
MASKED = "masked"
NOT_SHOWN = (
    "Keys, properties and payloads are masked here; an approver whose role may peek on the "
    "topic reads them on the Cursors page."
)
"""What a masked approval body says, once."""
J = TypeVar("J")


def may_read(
    authorized: Callable[[str, Operation, str], object], role: str, topics: Iterable[str]
) -> bool:
    """Whether ``role`` may read the content of messages of every one of ``topics``:
    ``authorized(role, PEEK_MESSAGES, topic)`` (the Broker's ``authorized_topic``) passes
    for each. A refusal, or a topic gone since, is an answer (False), never an error."""
    try:
        for topic in topics:
            authorized(role, Operation.PEEK_MESSAGES, topic)
    except (NotAuthorizedError, NotFoundError):
        return False
    return True


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def masked_value(field: str, value: Any, size: object = None) -> Any:
    """``value`` of the content ``field``, masked: how much was there, never what. None
    (no key, no condition) stays None: its absence is not content."""
    if value is None:
        return None
    if field in PAIRS_FIELDS and isinstance(value, Mapping):
        return f"{_plural(len(value), 'property', 'properties')}, {MASKED}"
    if field in LIST_FIELDS and isinstance(value, list | tuple):
        return f"{_plural(sum(v is not None for v in value), 'key', 'keys')}, {MASKED}"
    if field in CONDITION_FIELDS and isinstance(value, Mapping):
        return {k: (v if k == "path" else MASKED) for k, v in value.items()}
    if isinstance(size, int) and not isinstance(size, bool):
        return f"{_plural(size, 'byte', 'bytes')}, {MASKED}"
    if isinstance(value, str):
        return f"{_plural(len(value.encode('utf-8', 'surrogatepass')), 'byte', 'bytes')}, {MASKED}"
    return MASKED


def masked(document: Any) -> Any:
    """A copy of a JSON ``document`` (a preview, an audit record's detail, a radar) with
    every content field masked (:func:`masked_value`), however deep; the rest as it is."""
    if isinstance(document, Mapping):
        size = document.get(SIZE_FIELD)
        return {
            k: masked_value(k, v, size if k == "payload" else None)
            if k in CONTENT_FIELDS
            else masked(v)
            for k, v in document.items()
        }
    if isinstance(document, list | tuple):
        return [masked(v) for v in document]
    return document


def shown(document: J, content: bool) -> J:
    """``document`` as a reader who may (``content``) or may not read content sees it (a
    mapping stays a mapping, a list a list)."""
    return document if content else cast(J, masked(document))


__all__ = [
    "CONTENT_FIELDS",
    "NOT_SHOWN",
    "masked",
    "masked_value",
    "may_read",
    "shown",
]
