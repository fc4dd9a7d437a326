from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.protocol.harness import Standalone, start


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    server = start(Path(tmp_path_factory.mktemp("standalone")))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(standalone: Standalone) -> Iterator[pulsar.Client]:
    c = standalone.client()
    try:
        yield c
    finally:
        c.close()
