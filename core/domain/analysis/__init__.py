"""Backlog analysis, stats, scans and message predicates."""
