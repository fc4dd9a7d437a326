"""Message ids as ``ledger:entry[:batchIndex]`` texts, as pulsar-admin prints them, and as
integer columns: a plan names 100,000s of them, so they are parsed in numpy."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.errors import InvalidSkipPlanError

_INT64_MAX = 2**63 - 1


def parse_triplets(texts: Sequence[object], where: str) -> npt.NDArray[np.int64]:
    """``ledger:entry[:batchIndex]`` texts as an ``(n, 3)`` int64 array (batch index -1 when
    absent); InvalidSkipPlanError naming ``where`` on anything else.

    Parsed as one joined text in numpy (a skip lists 100,000s of ids); anything odd is
    parsed again one text at a time, to name the first bad one.
    """
    if all(isinstance(text, str) for text in texts):
        rows = _parse_joined(texts)  # type: ignore[arg-type]
        if rows is not None:
            return rows
    return _parse_each(texts, where)


def _parse_joined(texts: Sequence[str]) -> npt.NDArray[np.int64] | None:
    """The rows of well-formed texts of plain digits; None when any text is not."""
    count = len(texts)
    fields = np.fromiter(map(str.count, texts, repeat(":", count)), np.int64, count) + 1
    joined = ":".join(texts)
    if np.any((fields < 2) | (fields > 3)) or not joined.replace(":", "").isdigit():
        return None if count else np.zeros((0, 3), dtype=np.int64)
    digits = joined.split(":")
    if max(map(len, digits)) > 18:
        return None  # past int64's safe width: the careful path checks the range
    values = np.array(digits, dtype=np.int64)
    starts = np.zeros(count, dtype=np.int64)
    np.cumsum(fields[:-1], out=starts[1:])
    rows = np.empty((count, 3), dtype=np.int64)
    rows[:, 0] = values[starts]
    rows[:, 1] = values[starts + 1]
    rows[:, 2] = np.where(fields == 3, values[np.minimum(starts + 2, values.size - 1)], -1)
    if np.any(rows[:, 2] > 2**31 - 1):
        return None
    return rows


def _parse_each(texts: Sequence[object], where: str) -> npt.NDArray[np.int64]:
    rows = np.empty((len(texts), 3), dtype=np.int64)
    for i, text in enumerate(texts):
        parts = text.split(":") if isinstance(text, str) else ()
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            values = [int(part) for part in parts]
        except ValueError:
            raise InvalidSkipPlanError(
                f"Invalid {where}[{i}]: {text!r} is not ledgerId:entryId[:batchIndex]"
            ) from None
        if len(values) == 2:
            values.append(-1)
        if not (0 <= values[0] <= _INT64_MAX and 0 <= values[1] <= _INT64_MAX) or not (
            -1 <= values[2] <= 2**31 - 1
        ):
            raise InvalidSkipPlanError(f"Invalid {where}[{i}]: {text!r} is out of range")
        rows[i] = values
    return rows


def triplets(
    ledger_ids: Sequence[int], entry_ids: Sequence[int], batch_indexes: Sequence[int]
) -> list[str]:
    """``ledger:entry[:batchIndex]`` of each message, as pulsar-admin prints them."""
    return [
        f"{led}:{ent}" if index < 0 else f"{led}:{ent}:{index}"
        for led, ent, index in zip(ledger_ids, entry_ids, batch_indexes, strict=True)
    ]


__all__ = ["parse_triplets", "triplets"]
