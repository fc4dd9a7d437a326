"""Pulsar's admin v2 path parameters, turned into topic names."""

from __future__ import annotations

from cursorops.core.domain.ids.topic_name import TopicName

TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
"""A persistent topic, or one partition of it (``{topic}-partition-N``)."""
SUBSCRIPTION = TOPIC + "/subscription/{subscription}"


def topic_name(tenant: str, namespace: str, topic: str) -> TopicName:
    """The topic the path names; InvalidTopicNameError (400) when it names none."""
    return TopicName.parse(f"persistent://{tenant}/{namespace}/{topic}")


def base_of(name: TopicName) -> str:
    """The topic itself, or the partitioned topic a partition belongs to."""
    return str(name.base) if name.is_partition else str(name)
