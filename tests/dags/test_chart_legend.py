"""The backlog audit chart's legend: a hostile subscription name is legible, cut, and the
legend stays inside the figure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.airflow.chart import LEGEND_CHARS, history_figure, legend_label
from cursorops.core.domain.legible import legible
from tests.hostile_text import HOSTILE, hidden_in

TOPIC = "persistent://acme/orders/events"


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.lists(HOSTILE, min_size=1, max_size=3, unique=True))
def test_the_legend_shows_hostile_names_legibly_inside_the_figure(names: list[str]) -> None:
    import matplotlib.pyplot as plt

    series = {
        (TOPIC, name): [(1_700_000_000_000 + k * 60_000, k) for k in range(3)] for name in names
    }
    figure = history_figure(series, {(TOPIC, names[0])}, "backlog of " + names[0])
    try:
        [axes] = figure.axes
        legend = axes.get_legend()
        texts = [t.get_text() for t in legend.get_texts()]
        assert texts == [legend_label(TOPIC, n, n == names[0]) for n in names]
        for name, text in zip(names, texts, strict=True):
            assert not hidden_in(text)
            whole = legible(f"acme/orders/events / {name}")
            assert whole.startswith(text.split("… (")[0].removesuffix(" (breach)"))
            assert len(text) <= LEGEND_CHARS + len("… (99,999 more characters) (breach)")
        assert not hidden_in(axes.get_title())
        renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
        box, page = legend.get_window_extent(renderer), figure.bbox
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 <= box.y1 <= page.y1
        title = axes.title.get_window_extent(renderer)
        assert page.x0 <= title.x0 and title.x1 <= page.x1
    finally:
        plt.close(figure)


def test_a_name_starting_with_an_underscore_is_in_the_legend() -> None:
    """matplotlib leaves out a label that starts with "_" when it collects them itself."""
    import matplotlib.pyplot as plt

    figure = history_figure({("persistent://_t/n/x", "_s"): [(1, 1)]}, set(), "t")
    try:
        assert [t.get_text() for t in figure.axes[0].get_legend().get_texts()] == ["_t/n/x / _s"]
    finally:
        plt.close(figure)
