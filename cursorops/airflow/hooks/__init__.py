"""Hooks of the cursorops provider."""

from __future__ import annotations

from cursorops.airflow.hooks.cursorops import CursorOpsHook

__all__ = ["CursorOpsHook"]
