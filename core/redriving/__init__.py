"""Redriving a dead-letter topic: the plan and its outcome."""
