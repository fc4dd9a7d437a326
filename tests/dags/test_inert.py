"""Requester text in an approval's Markdown: inert whatever it holds.

Checked against a real CommonMark renderer (markdown-it-py, GFM tables on, raw
HTML on, as the most permissive reader would render it): the text renders as
exactly itself, in one paragraph or one table cell, with no element of its own.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.position import Position
from cursorops.core.services.gating.inert import (
    CELL_CHARS,
    CELL_RUN_CHARS,
    MAX_CHARS,
    RUN_CHARS,
    cell,
    inert,
)
from tests.hostile_text import HOSTILE as SHARED_HOSTILE
from tests.hostile_text import hidden_in

RENDERER = MarkdownIt("commonmark", {"html": True}).enable("table")
HOSTILE = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("<>!-*_`|[]()#&;:\\/'\"\n\r\t ")),
        st.sampled_from(["\u202e", "\u200b", "\x00", "\u2028", "\ufeff"]),
        st.characters(),
    ),
    max_size=200,
)


def visible(text: str) -> str:
    """What a reader sees: the text, hidden characters spelled out as inert() does."""
    import unicodedata

    return "".join(
        f"\\u{{{ord(c):04X}}}"
        if unicodedata.category(c) in {"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"}
        else c
        for c in text
    )


def assert_shown(shown: str, text: str, run: int = RUN_CHARS) -> None:
    """``shown`` (rendered, unescaped) is ``text``'s visible form, or a beginning of it
    followed by the cut said with the exact count; no run without a space is longer than
    ``run`` characters, so nothing widens its paragraph or cell."""
    whole = visible(text).strip()
    said = re.fullmatch(r"(.*) … \((\d+) more characters\)", shown, re.S)
    if said is None:
        assert shown == whole
    else:
        # Markdown drops leading spaces; the count is of the whole legible text.
        whole, head = visible(text).lstrip(), said.group(1).lstrip()
        assert whole.startswith(head) and len(head) + int(said.group(2)) == len(whole)
    assert all(len(word) <= run for word in shown.split())


@settings(max_examples=400, deadline=None)
@given(HOSTILE)
def test_a_paragraph_renders_exactly_the_text_and_nothing_else(text: str) -> None:
    rendered = RENDERER.render(f"- **Reason:** {inert(text)}\n")
    inner = re.fullmatch(r"<ul>\n<li><strong>Reason:</strong>(.*)</li>\n</ul>\n", rendered, re.S)
    assert inner is not None, rendered
    assert "<" not in inner.group(1)  # no element of its own: every < is &lt;
    assert_shown(html.unescape(inner.group(1)).strip(), text)


@settings(max_examples=400, deadline=None)
@given(HOSTILE, HOSTILE)
def test_a_table_row_keeps_its_cells(first: str, second: str) -> None:
    table = f"| a | b |\n| --- | --- |\n| {cell(first)} | {cell(second)} |\n"
    rendered = RENDERER.render(table)
    cells = re.findall(r"<td>(.*?)</td>", rendered, re.S)
    assert len(cells) == 2, rendered
    for shown, text in zip(cells, (first, second), strict=True):
        assert_shown(html.unescape(shown), text, CELL_RUN_CHARS)
        assert len(html.unescape(shown)) <= CELL_CHARS + len(" … (99999 more characters)")


def test_the_hidden_plan_line_attack_is_shown_as_text() -> None:
    reason = "one pill\n<!--\n**Plan id:** `" + "f" * 64 + "`\n-->"
    rendered = RENDERER.render(f"- **Reason:** {inert(reason)}\n\n**Plan id:** `{'a' * 64}`\n")
    assert "&lt;!--" in rendered and "<!--" not in rendered
    assert rendered.count("<strong>Plan id:</strong>") == 1


def test_long_text_is_cut_and_says_so() -> None:
    assert inert("x y" * MAX_CHARS).endswith(f"… ({3 * MAX_CHARS - MAX_CHARS} more characters)")
    # A run without a space is cut where it grows past RUN_CHARS: no wider than that.
    assert inert("x" * 20_000) == "x" * RUN_CHARS + f" … ({20_000 - RUN_CHARS} more characters)"
    assert cell("inv\u202egnp.exe" * 3) == (
        # A spelled-out code point is never cut in two.
        "inv\\\\u\\{202E\\}gnp\\.exeinv … (33 more characters)"
    )


@settings(max_examples=500, deadline=None)
@given(SHARED_HOSTILE)
def test_every_hostile_text_is_cut_and_legible_in_a_paragraph_and_a_cell(text: str) -> None:
    """The strategy every surface shares: nothing hidden, nothing wider than a run."""
    paragraph = RENDERER.render(f"- **Reason:** {inert(text)}\n")
    table = RENDERER.render(f"| a |\n| --- |\n| {cell(text)} |\n")
    [in_paragraph] = re.findall(r"<li><strong>Reason:</strong>(.*)</li>", paragraph, re.S)
    [in_cell] = re.findall(r"<td>(.*)</td>", table, re.S)
    for raw, run in ((in_paragraph, RUN_CHARS), (in_cell, CELL_RUN_CHARS)):
        assert "<" not in raw  # no element of its own
        shown = html.unescape(raw).strip()
        assert not hidden_in(shown)
        assert_shown(shown, text, run)


def is_unicode(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@given(reason=HOSTILE.filter(is_unicode), key=HOSTILE.filter(is_unicode))
@settings(max_examples=60, deadline=None)
def test_a_gated_operations_preview_makes_no_element_of_what_others_wrote(
    reason: str, key: str
) -> None:
    """Undo, redrive, reset and unsubscribe previews render a plan's ``preview()``: the
    requester's reason and any text in the plan (a message key here) stay text."""
    from cursorops.core.domain.plans.plan_record import RESET_CURSOR, PlanBinding, PlanRecord
    from cursorops.core.services.gating import Caller, ResetCursor
    from cursorops.core.services.gating.approval_text import preview_markdown
    from cursorops.core.services.gating.operation import gated_document
    from cursorops.core.services.gating.reset import PartitionReset, ResetPlan

    plan = ResetPlan(
        "persistent://acme/ops/t",
        "s",
        (PartitionReset("persistent://acme/ops/t", Position(1, 0), Position(1, 4), 3, 8),),
        1,
        None,
    )
    preview = {**plan.preview(), "messages": [{"id": "1:2", "key": key}]}
    asked = ResetCursor(
        topic="persistent://acme/ops/t", subscription="s", timestamp_ms=1, reason=reason
    )
    document = gated_document(Caller("ann", "ann"), asked, preview)
    record = PlanRecord.create(
        PlanBinding("d", "r", "ann", "ann", RESET_CURSOR),
        plan,
        document,
        required_approvals=1,
        created_at_ms=1,
    )
    rendered = RENDERER.render(preview_markdown(record, content=True))
    tags = set(re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", rendered))
    assert tags <= {
        "p",
        "strong",
        "code",
        "h3",
        "ul",
        "li",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
    }
    assert "<a" not in rendered and "<img" not in rendered and "<script" not in rendered.lower()


@pytest.mark.parametrize("field", ["reason", "key"])
def test_a_plan_document_with_a_lone_surrogate_is_refused_clearly(field: str) -> None:
    """JSON's "\\ud800" decodes to a lone surrogate, which is not Unicode: no digest and no
    store can take it, so the record is refused with what is wrong, not a traceback."""
    from cursorops.core.domain.plans.plan_record import RESET_CURSOR, PlanBinding, PlanRecord
    from cursorops.core.services.gating import Caller, ResetCursor
    from cursorops.core.services.gating.operation import gated_document
    from cursorops.core.services.gating.reset import PartitionReset, ResetPlan

    plan = ResetPlan(
        "persistent://acme/ops/t",
        "s",
        (PartitionReset("persistent://acme/ops/t", Position(1, 0), Position(1, 4), 3, 8),),
        1,
        None,
    )
    text = json.loads('"why \\ud800"')
    values = {"reason": "ok", "key": "k", field: text}
    preview = {**plan.preview(), "messages": [{"id": "1:2", "key": values["key"]}]}
    asked = ResetCursor(
        topic="persistent://acme/ops/t", subscription="s", timestamp_ms=1, reason=values["reason"]
    )
    document = gated_document(Caller("ann", "ann"), asked, preview)
    with pytest.raises(InvalidArgumentError, match="lone surrogate"):
        PlanRecord.create(
            PlanBinding("d", "r", "ann", "ann", RESET_CURSOR),
            plan,
            document,
            required_approvals=1,
            created_at_ms=1,
        )


@given(name=HOSTILE.filter(is_unicode))
@settings(max_examples=60, deadline=None)
def test_the_approval_subject_shows_a_hostile_subscription_name_legibly(name: str) -> None:
    """The subject is plain text on Airflow's page and in its Required Actions list: a
    subscription name with a bidirectional control or a newline cannot reorder it or add a
    line, and every other character reads as written."""
    import unicodedata

    from cursorops.core.domain.legible import HIDDEN, legible
    from cursorops.core.domain.plans.plan_record import RESET_CURSOR, PlanBinding, PlanRecord
    from cursorops.core.services.gating.approval_text import subject
    from cursorops.core.services.gating.reset import PartitionReset, ResetPlan

    topic = "persistent://acme/ops/t"
    plan = ResetPlan(
        topic, name, (PartitionReset(topic, Position(1, 0), Position(1, 4), 3, 8),), 1, None
    )
    record = PlanRecord.create(
        PlanBinding("d", "r", "ann", "ann", RESET_CURSOR),
        plan,
        {},
        required_approvals=2,
        created_at_ms=1,
    )
    title = subject(record, 2)
    assert not any(unicodedata.category(c) in HIDDEN for c in title)
    assert f" / {legible(name)} (asked by ann): approval 2 of 2" in title
