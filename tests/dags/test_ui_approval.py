"""bob approves a skip in the real Airflow UI, in headless Chromium (Debian's package).

On the session's Airflow (standalone, tests/dags/conftest.py): alice requests a skip
(its run started over REST with the plan's digest) with a reason that tries to hide
a line (``<!-- ... -->``); bob logs in through the login form, opens the gate's
Required Actions page, reads the
preview (the requester's comment shown as text, payloads masked), then the
same plan on the Cursors page (the same plan id, the comment as text, payload
excerpts shown, since bob may peek), and clicks Approve. Screenshots of each
step are kept under ``test-artifacts/screenshots/`` (gitignored) as the test's
artifacts.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.airflow_harness import Airflow, password
from tests.dags.conftest import label, request_skip, seed_topic
from tests.dags.test_skip_messages_airflow import DAG, GATE, pick

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
UI_TIMEOUT_MS = 120_000
"""The first page load of the UI on a loaded 2-core machine can take half a minute."""


def chromium() -> str:
    """Debian's Chromium (``apt-get install chromium``; .ci/run installs it)."""
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
    )
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: CI must run the UI test", pytrace=False)
    pytest.skip("chromium is not installed (apt-get install chromium chromium-driver)")


def test_second_user_approves_in_the_ui(airflow: Airflow, cursorops_home):
    from playwright.sync_api import sync_playwright

    executable = chromium()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    seeded = seed_topic(cursorops_home)
    ids = pick(seeded)
    before = seeded.unacknowledged()
    reason = "poison pills <!-- Plan id: forged --> see INC-7"
    run = request_skip(airflow, seeded, ids, reason=reason)
    airflow.wait_awaiting_input(DAG, run, GATE)
    digest = airflow.dag_run(DAG, run)["conf"]["plan_digest"]

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(UI_TIMEOUT_MS)

            page.goto(f"{airflow.base_url}/")
            page.locator("input[name=username]").fill("bob")
            page.locator("input[name=password]").fill(password("bob"))
            page.screenshot(path=SCREENSHOTS / "ui_approval_1_login.png")
            page.locator("button[type=submit]").click()
            page.wait_for_url(lambda url: "/auth/login" not in url)

            page.goto(f"{airflow.base_url}/dags/{DAG}/runs/{run}/tasks/{GATE}/required_actions")
            approve = page.locator("[data-testid=hitl-option-Approve]")
            approve.wait_for(state="visible")
            # The gate's body is the preview: counts, the exact backlog, the plan id; the
            # requester's comment is text, and payloads are masked on Airflow's page.
            page.get_by_text(f"{len(ids)} id(s)").first.wait_for()
            page.get_by_text(digest).first.wait_for()
            page.get_by_text("<!-- Plan id: forged -->", exact=False).first.wait_for()
            page.get_by_text("masked", exact=False).first.wait_for()
            assert page.get_by_text("reminder #2").count() == 0
            assert seeded.unacknowledged() == before
            page.screenshot(path=SCREENSHOTS / "ui_approval_2_preview.png", full_page=True)

            # The Cursors page shows the same plan record: same plan id, the comment as
            # text, and the payload excerpts bob's role may peek at.
            cursors = browser.new_page(viewport={"width": 1400, "height": 1000})
            cursors.set_default_timeout(UI_TIMEOUT_MS)
            cursors.context.add_cookies(
                [{"name": "_token", "value": airflow.token("bob"), "url": airflow.base_url}]
            )
            cursors.goto(f"{airflow.base_url}/cursorops/ui")
            row = cursors.locator(f"[data-testid=approval-row][data-run-id='{run}']")
            row.wait_for()
            row.locator("summary").click()
            row.locator("details[data-payloads=shown]").wait_for()
            row.get_by_text(digest).first.wait_for()
            row.get_by_text("<!-- Plan id: forged -->", exact=False).first.wait_for()
            row.get_by_text("reminder #2").first.wait_for()
            cursors.screenshot(path=SCREENSHOTS / "ui_approval_2b_cursors.png", full_page=True)
            cursors.close()

            approve.click()
            page.get_by_text("response successful").first.wait_for()
            page.screenshot(path=SCREENSHOTS / "ui_approval_3_answered.png", full_page=True)

            assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
            page.goto(f"{airflow.base_url}/dags/{DAG}/runs/{run}")
            page.get_by_text("Triggering User").first.wait_for()
            page.screenshot(path=SCREENSHOTS / "ui_approval_4_run.png", full_page=True)
        finally:
            browser.close()

    assert seeded.unacknowledged() == before - {label(m) for m in ids}
    [request] = seeded.audit("skip-request")
    assert request["outcome"] == "applied"
    assert request["requester"] == "alice"
    assert request["answer"]["by"] == "bob"  # type: ignore[index]
    for shot in SCREENSHOTS.glob("ui_approval_*.png"):
        assert shot.stat().st_size > 10_000, shot


HOSTILE_REASON = "\u202eevil by asked | **APPROVED** " + "r" * 440 + "\n<!-- hidden --> \u200bzero"
"""As long as a reason may be (500 characters), without a space."""
HOSTILE_TICKET = "OPS\u2011" + "t" * 250
"""As long as a ticket may be (256 characters)."""
FITS = """() => {
  const bidi = /[\\u202A-\\u202E\\u2066-\\u2069\\u200B-\\u200F\\uFEFF]/;
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (bidi.test(node.data)) raw.push(node.data.slice(0, 60));
  }
  const wide = [];
  for (const el of document.querySelectorAll("table, td, th, li, p, h1, h2, h3, h4")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0) continue;
    if (box.right > innerWidth + 1 || el.scrollWidth > el.clientWidth + 1) {
      wide.push(`${el.tagName} ${Math.round(box.right)} ${el.scrollWidth}>${el.clientWidth} ` +
        el.textContent.slice(0, 40));
    }
  }
  const root = document.documentElement;
  return { raw, wide, page: [root.scrollWidth, root.clientWidth] };
}"""


def test_a_hostile_request_stays_legible_and_inside_the_pane(airflow: Airflow, cursorops_home):
    """A reason of the longest length allowed without a space, with bidirectional controls,
    a newline and a comment, and the longest ticket: Airflow's approval page and the Cursors
    preview show them legibly and keep every table, paragraph and the page inside the
    window, at 1,400 and 1,000 px."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    seeded = seed_topic(cursorops_home)
    run = request_skip(airflow, seeded, pick(seeded), reason=HOSTILE_REASON, ticket=HOSTILE_TICKET)
    airflow.wait_awaiting_input(DAG, run, GATE)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True)
            try:
                for width in (1400, 1000):
                    context = browser.new_context(viewport={"width": width, "height": 1000})
                    context.add_cookies(
                        [{"name": "_token", "value": airflow.token("bob"), "url": airflow.base_url}]
                    )
                    page = context.new_page()
                    page.set_default_timeout(UI_TIMEOUT_MS)
                    page.goto(
                        f"{airflow.base_url}/dags/{DAG}/runs/{run}/tasks/{GATE}/required_actions"
                    )
                    page.locator("[data-testid=hitl-option-Approve]").wait_for(state="visible")
                    page.get_by_text("\\u{202E}evil by asked", exact=False).first.wait_for()
                    seen = page.evaluate(FITS)
                    page.screenshot(
                        path=SCREENSHOTS / f"ui_approval_hostile_{width}_airflow.png",
                        full_page=True,
                    )
                    assert seen["raw"] == [] and seen["wide"] == [], seen
                    assert seen["page"][0] <= seen["page"][1], seen

                    cursors = context.new_page()
                    cursors.set_default_timeout(UI_TIMEOUT_MS)
                    cursors.goto(f"{airflow.base_url}/cursorops/ui")
                    row = cursors.locator(f"[data-testid=approval-row][data-run-id='{run}']")
                    row.locator("summary").click()
                    row.locator("details[data-payloads]").wait_for()
                    row.get_by_text("\\u{202E}evil by asked", exact=False).first.wait_for()
                    seen = cursors.evaluate(FITS)
                    cursors.screenshot(
                        path=SCREENSHOTS / f"ui_approval_hostile_{width}_cursors.png",
                        full_page=True,
                    )
                    assert seen["raw"] == [] and seen["wide"] == [], seen
                    assert seen["page"][0] <= seen["page"][1], seen
                    context.close()
            finally:
                browser.close()
    finally:
        airflow.answer(DAG, run, GATE, "Reject", user="bob")
