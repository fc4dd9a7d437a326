"""A command refused with a protocol error of its own: a refusal no other door of cursorops
can meet (sticky hash ranges, producer access modes), so not a :mod:`cursorops.core.domain.errors`
leaf."""

from __future__ import annotations

from cursorops.wire.commands import ServerError


class Refusal(Exception):
    """Answered to the command with ``code``; the connection goes on."""

    def __init__(self, code: ServerError, message: str) -> None:
        super().__init__(message)
        self.code = code
