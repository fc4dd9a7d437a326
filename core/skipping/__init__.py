"""Skipping messages: the skip primitive, its payloads, plans and plan records."""
