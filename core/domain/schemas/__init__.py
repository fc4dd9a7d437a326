"""Pulsar's schema registry semantics: schema infos, versions and compatibility checks."""

from __future__ import annotations

from cursorops.core.domain.schemas.compatibility import (
    DEFAULT_STRATEGY,
    CompatibilityStrategy,
    check_compatible,
    validate,
)
from cursorops.core.domain.schemas.schema_info import (
    SchemaInfo,
    SchemaType,
    decode_version,
    encode_version,
)

__all__ = [
    "DEFAULT_STRATEGY",
    "CompatibilityStrategy",
    "SchemaInfo",
    "SchemaType",
    "check_compatible",
    "decode_version",
    "encode_version",
    "validate",
]
