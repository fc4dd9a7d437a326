"""A portable plan: a gated operation's plan as one JSON object, identified by its content.

Every gated operation's plan travels and is stored as JSON text (a plan record's
``plan_json``) with an id taken over its content (``planId``, 64 hex digits of
SHA-256), so a plan read back is the plan that was previewed: a document whose
content no longer hashes to its ``planId`` is refused. A plan class says only what
its content is (:meth:`PortablePlan.content`) and how to read it back
(:meth:`PortablePlan.from_content`); this module does the hashing, the spelling and
the check, once for all of them.

Two spellings exist, and the records already stored keep theirs byte for byte (a
record's digest covers the plan text's SHA-256):

- :attr:`Spelling.ID_FIRST` (skip and undo-skip plans): the content hashed as
  ``json.dumps(content, sort_keys=True, separators=(",", ":"))``, non-ASCII text
  escaped; the text is ``{"planId":"<id>",`` followed by that content;
- :attr:`Spelling.SORTED` (reset-cursor, unsubscribe and redrive plans): the
  content hashed as :func:`canonical_json` writes it (UTF-8 as is); the text is
  ``planId`` and the content together, every key sorted.

Pure: no store here.
"""

from __future__ import annotations

import enum
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from functools import cached_property
from typing import Any, ClassVar, Self

from cursorops.core.domain.errors import InvalidArgumentError, InvalidInputError


def canonical_json(value: object, *, ascii_only: bool = False) -> str:
    """The one JSON spelling digests are taken over: sorted keys, no spaces; UTF-8 as is
    unless ``ascii_only`` (then every non-ASCII character is a ``\\u`` escape)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only)


class Spelling(enum.Enum):
    """How a plan's text is spelled (see the module's docstring)."""

    ID_FIRST = "id-first"
    SORTED = "sorted"


class PortablePlan(ABC):
    """The plan of a gated operation: on one subscription of one topic, of a known number of
    messages, content-addressed, written by :meth:`dumps` and read by :meth:`from_json`."""

    SPELLING: ClassVar[Spelling]
    KIND: ClassVar[str]
    """What errors call it: ``reset plan``."""
    INVALID: ClassVar[type[InvalidInputError]] = InvalidArgumentError
    """The error a malformed or altered document raises."""

    topic: str
    subscription: str

    @property
    @abstractmethod
    def messages(self) -> int:
        """How many messages the plan acts on (what the approval quorum is decided by)."""

    @abstractmethod
    def content(self) -> dict[str, Any]:
        """Everything in the plan but its id: what the id is taken over."""

    @classmethod
    @abstractmethod
    def from_content(cls, content: Mapping[str, Any]) -> Self:
        """The plan :meth:`content` gave ``content``; raises :attr:`INVALID` (or KeyError,
        TypeError, ValueError, which :meth:`from_json` turns into it) on anything else."""

    @cached_property
    def canonical(self) -> str:
        """The content as its id is taken over."""
        return canonical_json(self.content(), ascii_only=self.SPELLING is Spelling.ID_FIRST)

    @cached_property
    def plan_id(self) -> str:
        """SHA-256 of :attr:`canonical` (64 hex digits)."""
        return hashlib.sha256(self.canonical.encode("utf-8")).hexdigest()

    def dumps(self) -> str:
        """The plan as JSON text, ``planId`` included; :meth:`from_json` reads it back."""
        if self.SPELLING is Spelling.ID_FIRST:
            return f'{{"planId":"{self.plan_id}",' + self.canonical[1:]
        return canonical_json({"planId": self.plan_id, **self.content()})

    @classmethod
    def from_json(cls, document: str | bytes | Mapping[str, Any]) -> Self:
        """A plan from :meth:`dumps`'s text (or that text parsed); refuses a malformed one and
        one altered since (its content no longer hashes to its ``planId``)."""
        if isinstance(document, (str, bytes)):
            try:
                document = json.loads(document)
            except ValueError as exc:
                raise cls.INVALID(f"Invalid {cls.KIND}: not JSON: {exc}") from exc
        if not isinstance(document, Mapping):
            raise cls.INVALID(f"Invalid {cls.KIND}: must be an object")
        if "planId" not in document:
            raise cls.INVALID(f"Invalid {cls.KIND}: missing planId")
        said = document["planId"]
        try:
            plan = cls.from_content({k: v for k, v in document.items() if k != "planId"})
        except (KeyError, TypeError, ValueError) as exc:
            raise cls.INVALID(f"Invalid {cls.KIND}: {type(exc).__name__}: {exc}") from exc
        except InvalidInputError as exc:
            if isinstance(exc, cls.INVALID):
                raise
            raise cls.INVALID(f"Invalid {cls.KIND}: {exc}") from exc
        if said != plan.plan_id:
            raise cls.INVALID(
                f"Invalid {cls.KIND}: planId {said!r} does not match its content "
                f"({plan.plan_id}); the plan was altered after planning"
            )
        return plan


class PreviewedPlan(PortablePlan):
    """A plan that says itself what its approver reads of it (reset, undo, redrive,
    unsubscribe; a skip's approver reads the listed messages instead)."""

    @abstractmethod
    def preview(self) -> dict[str, Any]:
        """What the approver reads of the plan, beside who asked and why."""


__all__ = ["PortablePlan", "PreviewedPlan", "Spelling", "canonical_json"]
