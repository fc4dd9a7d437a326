"""The backlog audit's chart: backlog history per subscription, a PNG.

matplotlib with the Agg backend (no display), imported only when drawing. A subscription's
name is someone else's text: its legend entry is legible and cut
(:func:`cursorops.core.domain.legible.cut`),
and no text is read as mathtext (``$...$``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cursorops.core.domain.legible import cut

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HOUR_MS = 3_600_000
LEGEND_CHARS = 60
"""What a legend entry shows of a topic and subscription before the cut."""
TITLE_CHARS = 56
"""What the title shows before the cut: with the cut said, it fits the 10-inch figure."""


def legend_label(topic: str, subscription: str, breached: bool) -> str:
    """One legend entry: the short topic and the subscription, legible, cut."""
    return cut(f"{topic.split('://', 1)[-1]} / {subscription}", LEGEND_CHARS) + (
        " (breach)" if breached else ""
    )


def draw_history(
    series: Mapping[tuple[str, str], Sequence[tuple[int, int]]],
    breached: set[tuple[str, str]],
    path: Path,
    title: str,
) -> Path:
    """One line per subscription (``(at_ms, messages)`` points); breached ones drawn bold."""
    import matplotlib.pyplot as plt

    figure = history_figure(series, breached, title)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
    return path


def history_figure(
    series: Mapping[tuple[str, str], Sequence[tuple[int, int]]],
    breached: set[tuple[str, str]],
    title: str,
) -> Figure:
    """:func:`draw_history`'s figure, laid out; the caller closes it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 5), dpi=100)
    lines: list[Any] = []
    labels: list[str] = []
    try:
        for (topic, subscription), points in series.items():
            if not points:
                continue
            times = [datetime.fromtimestamp(at / 1000, tz=UTC) for at, _ in points]
            values = [messages for _, messages in points]
            hot = (topic, subscription) in breached
            [line] = axes.plot(
                times,  # type: ignore[arg-type]  # matplotlib's stubs omit its datetime units
                values,
                marker="o",
                linewidth=2.5 if hot else 1.2,
            )
            lines.append(line)
            labels.append(legend_label(topic, subscription, hot))
        stamps = [at for points in series.values() for at, _ in points]
        if stamps and max(stamps) - min(stamps) < HOUR_MS:
            # One run, or runs minutes apart: the data's own span and a twentieth of it on
            # each side (at least a minute), not matplotlib's years nor an hour's window.
            pad = timedelta(milliseconds=max((max(stamps) - min(stamps)) / 20, 60_000))
            low = datetime.fromtimestamp(min(stamps) / 1000, tz=UTC) - pad
            high = datetime.fromtimestamp(max(stamps) / 1000, tz=UTC) + pad
            axes.set_xlim(low, high)  # type: ignore[arg-type]
        axes.set_xlabel("time (UTC)")
        axes.set_ylabel("backlog (messages)")
        axes.set_title(cut(title, TITLE_CHARS), parse_math=False)
        formatter = mdates.DateFormatter("%Y-%m-%d %H:%M", tz=UTC)  # type: ignore[no-untyped-call]
        axes.xaxis.set_major_formatter(formatter)
        axes.grid(True, alpha=0.3)
        if lines:
            # Handles and labels given: matplotlib would leave out a label starting with "_".
            legend = axes.legend(lines, labels, fontsize="small", loc="upper left")
            for text in legend.get_texts():
                text.set_parse_math(False)
        figure.autofmt_xdate()
        figure.tight_layout()
    except BaseException:
        plt.close(figure)
        raise
    return figure
