"""Message ids as aligned integer columns, MessageId objects built only when asked.

A producer call of 100,000s of messages returns its ids as five numpy arrays:
building one :class:`~cursorops.core.domain.ids.message_id.MessageId` per message costs more than
writing the messages. :class:`MessageIdColumns` is a read-only sequence of
``MessageId``: indexing or iterating builds the ids it hands out, slicing keeps
the columns, and callers that work on arrays read the columns directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

from cursorops.core.domain.ids.message_id import MessageId

_CHUNK = 65_536
"""Ids built at a time while iterating."""


class MessageIdColumns(Sequence[MessageId]):
    """The ids of ``len(self)`` messages, one row per message, in the order sent.

    ``ledger_id`` and ``entry_id`` are int64; ``partition``, ``batch_index`` and
    ``batch_size`` int32, with the meanings of the fields of ``MessageId``. The
    arrays are read-only views; equality compares the columns ``MessageId``
    equality compares (not ``batch_size``).
    """

    __slots__ = ("ledger_id", "entry_id", "partition", "batch_index", "batch_size")

    ledger_id: np.ndarray
    entry_id: np.ndarray
    partition: np.ndarray
    batch_index: np.ndarray
    batch_size: np.ndarray

    def __init__(
        self,
        ledger_id: np.ndarray,
        entry_id: np.ndarray,
        partition: np.ndarray,
        batch_index: np.ndarray,
        batch_size: np.ndarray,
    ) -> None:
        columns = (
            ("ledger_id", ledger_id, np.int64),
            ("entry_id", entry_id, np.int64),
            ("partition", partition, np.int32),
            ("batch_index", batch_index, np.int32),
            ("batch_size", batch_size, np.int32),
        )
        length = len(ledger_id)
        for name, values, dtype in columns:
            array = np.asarray(values, dtype=dtype)
            if array.ndim != 1 or len(array) != length:
                raise ValueError(f"MessageIdColumns: {name} must be 1-D with {length} rows")
            array = array.view()
            array.flags.writeable = False
            object.__setattr__(self, name, array)

    @classmethod
    def empty(cls) -> MessageIdColumns:
        nothing = np.empty(0, np.int64)
        return cls(nothing, nothing, nothing, nothing, nothing)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("MessageIdColumns is read-only")

    def __len__(self) -> int:
        return len(self.ledger_id)

    @overload
    def __getitem__(self, index: int) -> MessageId: ...

    @overload
    def __getitem__(self, index: slice) -> MessageIdColumns: ...

    def __getitem__(self, index: int | slice) -> MessageId | MessageIdColumns:
        if isinstance(index, slice):
            return MessageIdColumns(*(column[index] for column in self._columns()))
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"MessageIdColumns indices must be integers or slices, not {index!r}")
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"MessageIdColumns index {index} out of range for {n} ids")
        i = int(index)
        return MessageId.of_store(
            int(self.ledger_id[i]),
            int(self.entry_id[i]),
            int(self.partition[i]),
            int(self.batch_index[i]),
            int(self.batch_size[i]),
        )

    def __iter__(self) -> Iterator[MessageId]:
        for start in range(0, len(self), _CHUNK):
            yield from self._build(start, start + _CHUNK)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageIdColumns):
            return NotImplemented
        return len(self) == len(other) and all(
            np.array_equal(mine, theirs)
            for mine, theirs in zip(self._columns()[:4], other._columns()[:4], strict=True)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageIdColumns({len(self)} ids)"

    def to_list(self) -> list[MessageId]:
        """Every id as a ``MessageId`` object (what ``Producer.send`` returns)."""
        return self._build(0, len(self))

    def _columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (self.ledger_id, self.entry_id, self.partition, self.batch_index, self.batch_size)

    def _build(self, start: int, stop: int) -> list[MessageId]:
        return MessageId.of_store_many(*(column[start:stop].tolist() for column in self._columns()))


def concatenate(parts: Sequence[MessageIdColumns]) -> MessageIdColumns:
    """The ids of ``parts`` one after the other."""
    if not parts:
        return MessageIdColumns.empty()
    columns = zip(*(part._columns() for part in parts), strict=True)
    return MessageIdColumns(*(np.concatenate(column) for column in columns))
