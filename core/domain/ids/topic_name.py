"""Topic names: ``persistent://tenant/namespace/topic``.

Partition *i* of a partitioned topic is ``persistent://tenant/namespace/topic-partition-i``.
Like pulsar-admin, a short name is completed: ``my-topic`` means
``persistent://public/default/my-topic`` and ``tenant/ns/topic`` means
``persistent://tenant/ns/topic``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from cursorops.core.domain.errors import InvalidTopicNameError

_PARTITION_SUFFIX = "-partition-"
# Pulsar's NamedEntity pattern "[-=:.\\w]*" with \\w meaning ASCII word characters
# (Java's default); fullmatch, not match with "$": "$" also matches before a trailing newline.
_NAME_PART = re.compile(r"[-=:.A-Za-z0-9_]+")
# Tenant, namespace and topic become folder names in the ledger store.
_RESERVED_PARTS = (".", "..")
MAX_NAME_CHARS = 200
"""Longest tenant, namespace or topic name (without ``-partition-N``), in characters.

Each becomes one folder name in the ledger store, which must stay under the
255-byte file name limit of common filesystems; with three such folders, the
partition folder and a segment file name (under 90 bytes) the path under the
ledger root stays below 800 bytes, far from the 4,096-byte PATH_MAX."""
MAX_LABEL_CHARS = 1024
"""Longest subscription or role name, in characters (they never become file names)."""
# A partition index is an int32, as in Pulsar's TopicName and MessageId.
_MAX_PARTITION_INDEX = 2**31 - 1
DOMAINS = ("persistent", "non-persistent")


def is_valid_entity_name(value: object) -> bool:
    """Pulsar's ``NamedEntity.checkName`` for a tenant, namespace or topic, plus a length cap."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_NAME_CHARS
        and _NAME_PART.fullmatch(value) is not None
        and value not in _RESERVED_PARTS
    )


def label_problem(value: object) -> str | None:
    """Why ``value`` cannot be a subscription or role name, or None when it can.

    Any Unicode text is allowed except: empty or blank, longer than
    :data:`MAX_LABEL_CHARS`, control characters (NUL included: PostgreSQL
    refuses it in text) and lone surrogates (not valid UTF-8, e.g. undecodable
    bytes from a command line).
    """
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    if not value.strip():
        return "must not be empty"
    if len(value) > MAX_LABEL_CHARS:
        return f"longer than {MAX_LABEL_CHARS} characters"
    for char in value:
        category = unicodedata.category(char)
        if category == "Cc":
            return f"control character U+{ord(char):04X} not allowed"
        if category == "Cs":
            return "not valid UTF-8 text"
    return None


def shown(text: str, limit: int = 120) -> str:
    """``text`` for a one-line error message: quoted, escaped, and cut when long."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} chars)"


def _check_part(kind: str, value: str, text: str, *, limit: int = MAX_NAME_CHARS) -> None:
    if not (
        0 < len(value) <= limit
        and _NAME_PART.fullmatch(value) is not None
        and value not in _RESERVED_PARTS
    ):
        raise InvalidTopicNameError(
            f"Invalid topic name {shown(text)}: bad {kind} {shown(value)} (use 1 to "
            f"{MAX_NAME_CHARS} of letters, digits and _ = : . -, not . or ..)"
        )


@dataclass(frozen=True, slots=True)
class TopicName:
    domain: str
    tenant: str
    namespace: str
    local_name: str
    """The topic's own name, including a ``-partition-N`` suffix when it names a partition."""

    @classmethod
    def parse(cls, text: str) -> TopicName:
        if not isinstance(text, str) or not text.strip():
            raise InvalidTopicNameError("Invalid topic name '': empty")
        if text != text.strip():
            # Pulsar refuses such names; trimming would act on a topic the operator did not name.
            raise InvalidTopicNameError(
                f"Invalid topic name {shown(text)}: remove the leading or trailing whitespace"
            )
        if "://" in text:
            domain, _, rest = text.partition("://")
            if domain not in DOMAINS:
                raise InvalidTopicNameError(
                    f"Invalid topic name {shown(text)}: domain must be persistent or non-persistent"
                )
            parts = rest.split("/")
            if len(parts) != 3:
                raise InvalidTopicNameError(
                    f"Invalid topic name {shown(text)}: expected {domain}://tenant/namespace/topic"
                )
        else:
            domain = "persistent"
            parts = text.split("/")
            if len(parts) == 1:
                parts = ["public", "default", parts[0]]
            elif len(parts) != 3:
                raise InvalidTopicNameError(
                    f"Invalid topic name {shown(text)}: expected topic, tenant/namespace/topic "
                    "or persistent://tenant/namespace/topic"
                )
        tenant, namespace, local = parts
        _check_part("tenant", tenant, text)
        _check_part("namespace", namespace, text)
        # The partition suffix is not part of the folder name: cap the base name only.
        _check_part("topic", local, text, limit=MAX_NAME_CHARS + 32)
        _check_part("topic", local.rpartition(_PARTITION_SUFFIX)[0] or local, text)
        if _PARTITION_SUFFIX in local:
            base, _, index = local.rpartition(_PARTITION_SUFFIX)
            if (
                not base
                or not index.isdigit()
                or (len(index) > 1 and index[0] == "0")
                or int(index) > _MAX_PARTITION_INDEX
            ):
                suffix = f"{_PARTITION_SUFFIX}{index}"
                raise InvalidTopicNameError(
                    f"Invalid topic name {shown(text)}: bad partition suffix '{suffix}'"
                )
        return cls(domain, tenant, namespace, local)

    @property
    def partition_index(self) -> int:
        """The partition number, or -1 when this is not a partition's name."""
        base, sep, index = self.local_name.rpartition(_PARTITION_SUFFIX)
        return int(index) if sep and base and index.isdigit() else -1

    @property
    def is_partition(self) -> bool:
        return self.partition_index >= 0

    @property
    def base(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself when not a partition)."""
        if not self.is_partition:
            return self
        base_local = self.local_name.rpartition(_PARTITION_SUFFIX)[0]
        return TopicName(self.domain, self.tenant, self.namespace, base_local)

    def partition(self, index: int) -> TopicName:
        if self.is_partition:
            raise InvalidTopicNameError(f"'{self}' is already a partition")
        if isinstance(index, bool) or not isinstance(index, int):
            raise InvalidTopicNameError(f"Invalid partition index {index!r}")
        if not 0 <= index <= _MAX_PARTITION_INDEX:
            raise InvalidTopicNameError(f"Invalid partition index {index}")
        return TopicName(
            self.domain, self.tenant, self.namespace, f"{self.local_name}{_PARTITION_SUFFIX}{index}"
        )

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local_name}"


DEAD_LETTER_SUFFIX = "-DLQ"
"""The Pulsar clients' dead-letter topic suffix (the Java client's
``RetryMessageUtil.DLQ_GROUP_TOPIC_SUFFIX``); their retry topic ends ``-RETRY``."""


def dead_letter_topic(topic: TopicName, subscription: str) -> TopicName:
    """The dead-letter topic a Pulsar client with a dead-letter policy and no topic of its
    own publishes ``subscription``'s failed messages of ``topic`` to:
    ``<topic>-<subscription>-DLQ``, beside the topic. A partition's name is taken as its
    topic's (``t-partition-2`` → ``t-<subscription>-DLQ``)."""
    base = topic.base
    return TopicName.parse(f"{base}-{subscription}{DEAD_LETTER_SUFFIX}")
