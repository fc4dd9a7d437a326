"""Identifiers: positions, message ids, topic names."""
