"""The backlog audit's chart: backlog history per subscription, a PNG.

matplotlib with the Agg backend (no display), imported only when drawing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

HOUR_MS = 3_600_000


def draw_history(
    series: Mapping[tuple[str, str], Sequence[tuple[int, int]]],
    breached: set[tuple[str, str]],
    path: Path,
    title: str,
) -> Path:
    """One line per subscription (``(at_ms, messages)`` points); breached ones drawn bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 5), dpi=100)
    try:
        for (topic, subscription), points in series.items():
            if not points:
                continue
            times = [datetime.fromtimestamp(at / 1000, tz=UTC) for at, _ in points]
            values = [messages for _, messages in points]
            hot = (topic, subscription) in breached
            axes.plot(
                times,  # type: ignore[arg-type]  # matplotlib's stubs omit its datetime units
                values,
                marker="o",
                linewidth=2.5 if hot else 1.2,
                label=f"{topic.split('://', 1)[-1]} / {subscription}"
                + (" (breach)" if hot else ""),
            )
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
        axes.set_title(title)
        formatter = mdates.DateFormatter("%Y-%m-%d %H:%M", tz=UTC)  # type: ignore[no-untyped-call]
        axes.xaxis.set_major_formatter(formatter)
        axes.grid(True, alpha=0.3)
        if series:
            axes.legend(fontsize="small", loc="upper left")
        figure.autofmt_xdate()
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
    return path
