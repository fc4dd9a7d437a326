"""Counts, for the Airflow tests, what a request costs across Airflow's processes.

Python imports ``sitecustomize`` at start-up from the path; the session's Airflow has this
folder on its ``PYTHONPATH`` and ``CURSOROPS_TEST_COUNTS`` naming a file. Every process
(the API server, the scheduler, each task) then appends one line to that file per
``Broker`` made (``<pid> broker``) and per validation of message ids against the stores
(``<pid> validate``: a call of :func:`cursorops.core.domain.acks.skip.validate`). Without the
variable nothing is patched.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

COUNTS = os.environ.get("CURSOROPS_TEST_COUNTS")


def _count(what: str) -> None:
    assert COUNTS is not None
    with open(COUNTS, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()} {what}\n")


def _patch_broker(module: ModuleType) -> None:
    broker = module.Broker
    made = broker.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        _count("broker")
        made(self, *args, **kwargs)

    broker.__init__ = counted


def _patch_validate(module: ModuleType) -> None:
    validate = module.validate

    def counted(*args: Any, **kwargs: Any) -> Any:
        _count("validate")
        return validate(*args, **kwargs)

    module.validate = counted


PATCHES = {
    "cursorops.core.services.broker": _patch_broker,
    "cursorops.core.domain.acks.skip": _patch_validate,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any, patch: Any) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(name, path, target)  # type: ignore[attr-defined]
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, PATCHES[name])
                return spec
        return None


if COUNTS:
    sys.meta_path.insert(0, _Finder())
