"""Configuration: one frozen object, built at the edge and passed in.

``core`` never reads environment variables; the CLI, the DAGs and the REST
plugin build a :class:`Config` (``Config.from_home``, or ``Config.from_environ``
given the environment as a mapping) and hand it down.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cursorops.core.domain.errors import InvalidArgumentError

DEFAULT_HOME = "~/.cursorops"


@dataclass(frozen=True)
class Config:
    home: Path
    """Root of the embedded installation (SQLite file, ledger folder)."""
    metadata_url: str
    """SQLAlchemy URL of the metadata store."""
    ledger_root: str
    """Folder holding the Parquet ledgers: a path or a ``file://`` URI
    (:mod:`cursorops.core.store.ledger_root`)."""
    superuser_roles: frozenset[str] = field(default_factory=lambda: frozenset({"admin"}))
    max_entries_per_ledger: int = 50_000
    """Ledger rollover: a partition starts a new ledger after this many entries."""
    max_partitions_per_topic: int = 1_000
    """Pulsar's ``maxNumPartitionsPerPartitionedTopic``: a partitioned topic may have
    at most this many partitions (Pulsar's default 0 means unlimited; here each
    partition is a metadata row and a ledger folder, so the cap is on by default)."""
    consumer_lease_ms: int = 30_000
    """A consumer stays registered this long after its last call; then its pending
    messages go to other consumers (as when Pulsar's broker loses a connection)."""
    broker_heartbeat_ms: int = 500
    """A broker writes its heartbeat this often (:mod:`cursorops.core.services.broker.cluster`)."""
    broker_dead_after_ms: int = 3_000
    """A broker whose heartbeat is older than this is dead for the others: they release
    its consumers and its writes are fenced. Consumer leases are the last resort."""

    @classmethod
    def from_home(
        cls,
        home: str | Path,
        *,
        metadata_url: str | None = None,
        ledger_root: str | None = None,
        superuser_roles: frozenset[str] | None = None,
        max_entries_per_ledger: int | None = None,
        max_partitions_per_topic: int | None = None,
        consumer_lease_ms: int | None = None,
    ) -> Config:
        home = Path(home).expanduser().resolve()
        kwargs: dict[str, object] = {}
        if superuser_roles is not None:
            kwargs["superuser_roles"] = frozenset(superuser_roles)
        if max_entries_per_ledger is not None:
            kwargs["max_entries_per_ledger"] = max_entries_per_ledger
        if max_partitions_per_topic is not None:
            kwargs["max_partitions_per_topic"] = max_partitions_per_topic
        if consumer_lease_ms is not None:
            kwargs["consumer_lease_ms"] = consumer_lease_ms
        return cls(
            home=home,
            metadata_url=metadata_url or f"sqlite:///{home / 'metadata.db'}",
            ledger_root=ledger_root or str(home / "ledgers"),
            **kwargs,  # type: ignore[arg-type]
        )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Config:
        """Build from ``CURSOROPS_HOME`` (default ``~/.cursorops``),
        ``CURSOROPS_METADATA_URL`` and ``CURSOROPS_LEDGER_ROOT`` (both default under
        the home) in ``environ``; the caller passes the mapping, so ``core`` reads none.
        ``CURSOROPS_MAX_PARTITIONS_PER_TOPIC`` sets :attr:`max_partitions_per_topic`.
        """
        cap = environ.get("CURSOROPS_MAX_PARTITIONS_PER_TOPIC") or None
        if cap is not None and not (cap.isascii() and cap.isdigit() and int(cap) >= 1):
            raise InvalidArgumentError(
                f"Invalid CURSOROPS_MAX_PARTITIONS_PER_TOPIC {cap!r}: expected an integer >= 1"
            )
        return cls.from_home(
            environ.get("CURSOROPS_HOME") or DEFAULT_HOME,
            metadata_url=environ.get("CURSOROPS_METADATA_URL") or None,
            ledger_root=environ.get("CURSOROPS_LEDGER_ROOT") or None,
            max_partitions_per_topic=int(cap) if cap is not None else None,
        )
