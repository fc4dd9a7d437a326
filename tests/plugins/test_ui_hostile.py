"""The Cursors pages show text someone else wrote legibly, and keep their width.

The REST app of ``api`` (Airflow's API app with the plugin, in-process) is served over
HTTP on a free port; headless Chromium (Debian's package) opens the pages at 1,400 and
1,000 px with a topic whose subscription names, keys, properties, payloads, requester,
reason and ticket are hostile: bidirectional controls, zero-width characters, newlines,
Markdown and HTML, 20,000 characters without a break. On every page no text node and no
title holds a raw hidden character, no cell's content overflows it, no card scrolls
sideways and the page is no wider than its window. A property test renders hypothesis'
hostile strings through the page's own functions into its tables. Screenshots under
``test-artifacts/screenshots/ui_hostile_*.png``.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.legible import HIDDEN, legible
from cursorops.core.services.gating import skip as skips
from tests.dags.test_ui_approval import SCREENSHOTS, chromium
from tests.hostile_text import HOSTILE, hidden_in
from tests.plugins.conftest import OPEN_NS, PREFIX, Api

pytestmark = [pytest.mark.slow]

WIDTHS = (1400, 1000)
NAME = "**APPROVED** | \u202eevil"
LONG_NAME = "<img src=x onerror=alert(1)>\u200b" + "y" * 990
KEY = "inv\u202egnp.exe" + "k" * 20_000
PROPERTY = ("pii\u200b", "yes\n" + "p" * 20_000)
REASON = "\u202e" + "r" * 20_000 + "\n<!-- **Plan id:** forged -->"
DIGEST = "f" * 64
APP_JS = Path(__file__).resolve().parents[2] / "cursorops" / "rest" / "ui_static" / "app.js"

MEASURE = """() => {
  const hidden = new RegExp(`[${HIDDEN.map((c) => `\\\\p{${c}}`).join("")}]`, "u");
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  // Text nodes of the page's own markup may hold its newlines and indentation.
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.data.replace(/^[\\n ]+|[\\n ]+$/g, "");
    if (hidden.test(text)) raw.push(text.slice(0, 80));
  }
  for (const el of document.querySelectorAll("[title]")) {
    if (hidden.test(el.title)) raw.push("title: " + el.title.slice(0, 80));
  }
  const overflowing = [];
  for (const el of document.querySelectorAll("td, th, .card .body, .card h2, #crumbs")) {
    if (el.scrollWidth > el.clientWidth + 1) {
      overflowing.push(`${el.tagName}.${el.className} ${el.scrollWidth} > ${el.clientWidth}: ` +
        el.textContent.slice(0, 60));
    }
  }
  const root = document.documentElement;
  return { raw, overflowing, page: [root.scrollWidth, root.clientWidth],
    text: document.body.innerText };
}"""


@pytest.fixture(scope="module")
def served(api: Api) -> Iterator[str]:
    """The API app served over HTTP on a free port, for the browser."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            api.client.app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def hostile_topic(api: Api) -> str:
    """A topic whose every producer- and requester-written value is hostile: two
    subscriptions with hostile names, four messages with a hostile key, property and
    payload, each negatively acknowledged four times (the radar lists them), a skip on
    NAME, and a request's closing record with a hostile requester, reason and ticket."""
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.broker import Broker, wall_clock_ms
    from cursorops.core.services.producer import OutgoingMessage

    topic = f"persistent://{OPEN_NS}/hostile-{secrets.token_hex(4)}"
    with Broker(api.config) as broker:
        broker.admin.create_topic("admin", topic, 2)
        for name in (NAME, LONG_NAME):
            broker.admin.create_subscription(
                "admin", topic, name, SubscriptionType.SHARED, initial_position="earliest"
            )
        message = OutgoingMessage(
            payload="Grüße 顧客\n<script>alert(1)</script>".encode(),
            key=KEY,
            properties=dict([PROPERTY]),
        )
        ids = broker.producing.produce("admin", topic, [message] * 6)
        # Each message negatively acknowledged four times: redelivered four times, as a
        # consumer's request counts (a consumer that merely leaves does not count).
        for _ in range(4):
            for name in (NAME, LONG_NAME):
                consumer = broker.reading.dispatcher("admin", topic, name).subscribe("c")
                for held in consumer.receive_many(6, prefetch=False):
                    consumer.negative_acknowledge(held)
                consumer.close()
        skips.skip_messages(broker.gated, "admin", topic, NAME, ids[:1], via="rest")
        broker.workflow.record_audit(
            "admin",
            "skip-request",
            topic,
            NAME,
            {
                "dagId": "cursorops_skip_messages",
                "runId": "manual__hostile",
                "requester": "ann\u202e\u200bmallory",
                "reason": REASON,
                "ticket": "OPS\u2011" + "t" * 5_000,
                "answer": {"by": "bob\u2066", "at": wall_clock_ms()},
                "outcome": "applied",
                "statement": "Skipped 1 message(s)\n" + "s" * 3_000,
                "planDigest": DIGEST,
            },
        )
    return topic


def test_the_page_spells_hidden_characters_as_core_legible_does(api: Api, served: str) -> None:
    """One rule: app.js's list of categories is cursorops.core.domain.legible.HIDDEN, and the
    browser's legible() spells out exactly the characters Python's does, over every code point (a
    newer Unicode in the browser may have assigned some that Python's still calls Cn)."""
    listed = re.search(r"const HIDDEN = \[([^\]]*)\];", APP_JS.read_text())
    assert listed is not None
    assert set(re.findall(r'"(\w\w)"', listed.group(1))) == HIDDEN
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True)
        try:
            page = opened(browser, api, served, 1000, "#/")
            spelled = page.evaluate(
                """() => {
                  const out = [];
                  for (let cp = 0; cp <= 0x10FFFF; cp++) {
                    const c = String.fromCodePoint(cp);
                    if (legible(c) !== c) out.push(cp);
                  }
                  return out;
                }"""
            )
            python = {cp for cp in range(0x110000) if legible(chr(cp)) != chr(cp)}
            # The browser spells out nothing Python shows; what Python alone spells out is
            # unassigned in its Unicode (assigned since, in the browser's).
            assert set(spelled) <= python
            assert all(unicodedata.category(chr(cp)) == "Cn" for cp in python - set(spelled))
            assert page.evaluate("legible('inv\\u202Egnp.exe')") == "inv\\u{202E}gnp.exe"
        finally:
            browser.close()


def test_hostile_values_are_legible_and_keep_every_page_in_its_width(
    api: Api, served: str, hostile_topic: str
) -> None:
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tenant, namespace, short = hostile_topic.removeprefix("persistent://").split("/")
    topic_route = f"#/{tenant}/{namespace}/{short}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True)
        try:
            for width in WIDTHS:
                page = opened(browser, api, served, width, topic_route)
                page.locator("[data-testid=subscriptions]").wait_for()
                page.locator("[data-testid=audit-table]").wait_for()
                fits(page.evaluate(f"HIDDEN => ({MEASURE})()", sorted(HIDDEN)), width)
                listed = page.locator("[data-testid=subscriptions]").inner_text()
                assert legible(NAME) in listed and "y" * 100 in listed
                page.screenshot(
                    path=SCREENSHOTS / f"ui_hostile_{width}_1_topic.png", full_page=True
                )

                route = f"{topic_route}/{quote(NAME, safe='')}"
                page.evaluate("route => { location.hash = route; }", route)
                page.locator("[data-testid=radar-table]").wait_for()
                page.locator("[data-testid=audit-table]").wait_for()
                seen = page.evaluate(f"HIDDEN => ({MEASURE})()", sorted(HIDDEN))
                fits(seen, width)
                crumbs = page.locator("#crumbs").inner_text()
                title = page.locator("#view-title").inner_text()
                assert legible(NAME) in crumbs and legible(NAME) in title
                # The radar's key, cut with the cut said; the reason and ticket likewise.
                radar = page.locator("[data-testid=radar-table]").inner_text()
                assert "inv\\u{202E}gnp.exe" in radar and "more characters)" in radar
                row = page.locator("[data-testid=audit-row][data-run-id=manual__hostile]")
                text = row.inner_text()
                assert "\\u{202E}rrr" in text and "ann\\u{202E}\\u{200B}mallory" in text
                assert f"… ({len(legible(REASON)) - 300:,} more characters)" in text
                assert DIGEST in text.replace("\n", "")
                page.screenshot(
                    path=SCREENSHOTS / f"ui_hostile_{width}_2_subscription.png", full_page=True
                )
                # One click shows the whole reason, which still wraps inside its cell.
                reason_cell = row.locator("td").nth(5)
                reason_cell.locator("[data-testid=more]").first.click()
                assert legible(REASON).replace("\n", "") in reason_cell.inner_text().replace(
                    "\n", ""
                )
                fits(page.evaluate(f"HIDDEN => ({MEASURE})()", sorted(HIDDEN)), width)
                page.screenshot(
                    path=SCREENSHOTS / f"ui_hostile_{width}_3_reason_opened.png", full_page=False
                )

                page.evaluate(
                    "route => { location.hash = route; }",
                    f"{topic_route}/{quote(LONG_NAME, safe='')}",
                )
                page.locator("[data-testid=bar-chart]").wait_for()
                page.locator("#radar-body [data-testid=radar-table]").wait_for()
                fits(page.evaluate(f"HIDDEN => ({MEASURE})()", sorted(HIDDEN)), width)
                page.screenshot(
                    path=SCREENSHOTS / f"ui_hostile_{width}_4_long_name.png", full_page=True
                )
                page.close()
        finally:
            browser.close()


def test_hostile_strings_in_every_cell_hide_nothing_and_keep_their_table_in_its_card(
    api: Api, served: str
) -> None:
    """hypothesis' hostile strings through the page's own rendering: an audit row (request
    and skip) and a seven-column table of theirs() cells, in a card at 1,000 px."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True)
        try:
            page = opened(browser, api, served, 1000, "#/")

            @settings(
                max_examples=40,
                deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture],
            )
            @given(st.lists(HOSTILE, min_size=7, max_size=7))
            def check(values: list[str]) -> None:
                seen = page.evaluate(
                    """([values, HIDDEN]) => {
                      const body = document.getElementById("view-body");
                      const request = { kind: "skip-request", atMs: 1, subscription: values[0],
                        detail: { dagId: "cursorops_skip_messages", runId: values[1],
                          requester: values[2], reason: values[3], ticket: values[4],
                          answer: { by: values[5], at: 2 }, outcome: "applied",
                          statement: values[6], planDigest: "f".repeat(64) } };
                      const skip = { kind: "skip", id: 7, atMs: 1, subscription: values[6],
                        role: values[5], detail: { via: "rest", skipped: [1], planId: values[4] } };
                      const refused = { kind: "skip-refused", atMs: 3, subscription: values[1],
                        role: values[2], detail: { dagId: "cursorops_skip_matching",
                          runId: values[0], requester: values[2], planDigest: null,
                          stage: "authorize", reason: values[3] } };
                      body.innerHTML = `<table data-testid="audit-table"><tbody>${
                        auditRow(request, new Set())}${auditRow(skip, new Set())}${
                        auditRow(refused, new Set())}</tbody></table>` +
                        `<table><tbody><tr>${values.map((v) => `<td>${theirs(v)}</td>`).join("")}` +
                        `</tr></tbody></table><p>${theirs(values[3], REASON_CHARS)}</p>`;
                      return null;
                    }""",
                    [values, sorted(HIDDEN)],
                )
                assert seen is None
                fits(page.evaluate(f"HIDDEN => ({MEASURE})()", sorted(HIDDEN)), 1000)
                shown = page.evaluate("document.getElementById('view-body').innerText")
                assert "refused at authorize, before any plan" in shown
                # Each value reads as the page's legible() spells it (white space collapsed,
                # as HTML does).
                missing = page.evaluate(
                    """(values) => {
                      const norm = (s) => s.replace(/\\s+/g, " ").trim();
                      const shown = norm(document.getElementById("view-body").innerText);
                      return values.filter((v) => !shown.includes(
                        norm([...legible(v)].slice(0, 20).join(""))));
                    }""",
                    values,
                )
                assert missing == []

            check()
        finally:
            browser.close()


def opened(browser: Any, api: Api, served: str, width: int, route: str) -> Any:
    """A new page as admin at ``width`` px, on the Cursors page's ``route``."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.add_cookies([{"name": "_token", "value": api.tokens["admin"], "url": served}])
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{served}{PREFIX}/ui{route}")
    page.locator("body[data-loaded]").wait_for()
    return page


def fits(seen: dict[str, Any], width: int) -> None:
    """Nothing raw that hides or reorders, no cell or card wider than its box, and the page
    no wider than its window."""
    assert seen["raw"] == [], seen["raw"]
    assert seen["overflowing"] == [], seen["overflowing"]
    page_width, view_width = seen["page"]
    assert page_width <= view_width <= width, seen["page"]
    # Python's Unicode may be older than the browser's: what it calls unassigned (Cn) the
    # browser may know, and show as the character it is.
    text = seen["text"].replace("\n", "").replace("\t", "")
    assert not [c for c in hidden_in(text) if unicodedata.category(c) != "Cn"]
