"""The api-server's start-up heap is frozen once, on the first request a process serves."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from cursorops.airflow.rest_app import create_app
from cursorops.rest.heap import FreezeHeap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def _serve(app: Any) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        pass

    asyncio.run(app({"type": "http", "path": "/"}, receive, send))


def test_the_first_request_freezes_what_exists_and_later_ones_do_not(unfrozen: None) -> None:
    served: list[int] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        served.append(gc.get_freeze_count())

    app = FreezeHeap(inner)
    assert gc.get_freeze_count() == 0
    _serve(app)
    assert served[0] > 10_000, "the process's objects were frozen before the request ran"
    frozen = gc.get_freeze_count()

    allocated_after = [[] for _ in range(10_000)]
    _serve(app)
    # Frozen objects that die leave the count; nothing allocated since joins it.
    assert gc.get_freeze_count() <= frozen, "what requests allocate stays collectable"
    assert len(served) == 2
    # The collector still walks them: they are in its generations, not the permanent one.
    assert any(o is allocated_after[0] for o in gc.get_objects())


def test_the_plugin_app_freezes_its_process() -> None:
    assert FreezeHeap in [middleware.cls for middleware in create_app().user_middleware]
