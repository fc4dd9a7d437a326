"""Topic names: ``persistent://tenant/namespace/topic``.

Partition *i* of a partitioned topic is ``persistent://tenant/namespace/topic-partition-i``.
Like pulsar-admin, a short name is completed: ``my-topic`` means
``persistent://public/default/my-topic`` and ``tenant/ns/topic`` means
``persistent://tenant/ns/topic``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import InvalidTopicNameError

_PARTITION_SUFFIX = "-partition-"
# fullmatch, not match with "$": "$" also matches before a trailing newline.
_NAME_PART = re.compile(r"[A-Za-z0-9_=:.\-]+")
# Tenant, namespace and topic become folder names in the ledger store.
_RESERVED_PARTS = (".", "..")
# A partition index is an int32, as in Pulsar's TopicName and MessageId.
_MAX_PARTITION_INDEX = 2**31 - 1
DOMAINS = ("persistent", "non-persistent")


def _check_part(kind: str, value: str, text: str) -> None:
    if not value or not _NAME_PART.fullmatch(value) or value in _RESERVED_PARTS:
        raise InvalidTopicNameError(f"Invalid topic name '{text}': bad {kind} '{value}'")


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
        text = text.strip()
        if "://" in text:
            domain, _, rest = text.partition("://")
            if domain not in DOMAINS:
                raise InvalidTopicNameError(
                    f"Invalid topic name '{text}': domain must be persistent or non-persistent"
                )
            parts = rest.split("/")
            if len(parts) != 3:
                raise InvalidTopicNameError(
                    f"Invalid topic name '{text}': expected {domain}://tenant/namespace/topic"
                )
        else:
            domain = "persistent"
            parts = text.split("/")
            if len(parts) == 1:
                parts = ["public", "default", parts[0]]
            elif len(parts) != 3:
                raise InvalidTopicNameError(
                    f"Invalid topic name '{text}': expected topic, tenant/namespace/topic "
                    "or persistent://tenant/namespace/topic"
                )
        tenant, namespace, local = parts
        _check_part("tenant", tenant, text)
        _check_part("namespace", namespace, text)
        _check_part("topic", local, text)
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
                    f"Invalid topic name '{text}': bad partition suffix '{suffix}'"
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
