from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.broker import Broker
from core.config import Config


class Clock:
    """A settable clock in epoch milliseconds, so delayed delivery is tested without sleeping."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def home_config(tmp_path: Path, metadata_url: str) -> Config:
    """An installation on SQLite or PostgreSQL (the ``metadata_url`` parameter)."""
    return Config.from_home(tmp_path / "home", metadata_url=metadata_url)


@pytest.fixture
def broker(home_config: Config, clock: Clock) -> Iterator[Broker]:
    with Broker(home_config, clock=clock) as b:
        b.create_tenant("admin", "acme", admin_roles=["acme-admin"])
        b.create_namespace("admin", "acme/ops")
        yield b
