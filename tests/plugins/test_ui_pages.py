"""The "Cursors" pages inside the real Airflow UI, in headless Chromium (Debian's package).

On the session's Airflow (standalone, tests/dags/conftest.py): the backlog
history is recorded by the audit DAG's own record step (``samples_from`` of an
exact analysis, ``Broker.analysis.record_backlog_audit``), one skip is applied at once
over REST, one waits for an approval in ``cursorops_skip_messages``. admin logs
in through Airflow's form, opens "Cursors" from Airflow's navigation, walks
tenant → namespace → topic → subscription, and finds on the page the figures
the REST API returns. Screenshots under ``test-artifacts/screenshots/``.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.airflow_harness import Airflow, password
from tests.dags.conftest import SUBSCRIPTION, label, request_skip, seed_topic
from tests.dags.test_skip_messages_airflow import DAG, GATE, pick
from tests.dags.test_ui_approval import SCREENSHOTS, UI_TIMEOUT_MS, chromium

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

PREFIX = "/cursorops"


def rest(airflow: Airflow, user: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return airflow.request(user, method, PREFIX + path, **kwargs)


def rest_path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def grouped(n: int) -> str:
    """How the page prints a count (en-US grouping)."""
    return f"{n:,}"


def record_history(config: Any, topic: str, at_ms: int, run_id: str) -> None:
    """What the audit DAG's record step stores for one run: exact counts per subscription."""
    from cursorops.airflow.backlog_audit import samples_from
    from cursorops.core.domain.analysis.backlog import TopicAnalysis
    from cursorops.core.services.broker import Broker

    with Broker(config) as broker:
        analysis = TopicAnalysis.of(topic, None, broker.analysis.analyze_backlog("admin", topic))
        ages = broker.analysis.backlog_ages("admin", topic)
        samples = samples_from(analysis.to_pulsar_json(), ages, at_ms, run_id)
        broker.analysis.record_backlog_audit("admin", run_id, samples)


def test_anonymous_gets_401(airflow: Airflow):
    for path in ("/ui", "/ui/static/app.js", "/admin/v2/tenants"):
        answer = httpx.get(f"{airflow.base_url}{PREFIX}{path}", timeout=60)
        assert answer.status_code == 401, (path, answer.text)
    bad = httpx.get(f"{airflow.base_url}{PREFIX}/ui", cookies={"_token": "not-a-jwt"}, timeout=60)
    assert bad.status_code in (401, 403), bad.text


@pytest.mark.timeout(1800)
def test_cursors_pages_show_the_figures_the_api_returns(airflow: Airflow, cursorops_home):
    from playwright.sync_api import sync_playwright

    executable = chromium()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("ui_cursors_*.png"):
        old.unlink()
    seeded = seed_topic(cursorops_home)
    topic = seeded.topic
    tenant, namespace, short = topic.removeprefix("persistent://").split("/")
    sub_path = f"{rest_path(topic)}/subscription/{SUBSCRIPTION}"

    # History: three audit runs an hour apart, each after more messages were consumed.
    from cursorops.core.services.broker import Broker, wall_clock_ms

    start = wall_clock_ms() - 3 * 3_600_000
    for k in range(3):
        record_history(cursorops_home, topic, start + k * 3_600_000, f"ui-audit-{k}")
        with Broker(cursorops_home) as broker:
            broker.reading.consume("admin", topic, SUBSCRIPTION, 4, ack=True)

    # A skip applied at once over REST (acme/orders requires no approval), by alice.
    direct = [m for m in seeded.ids[20:60] if label(m) in seeded.unacknowledged()][:2]
    answer = rest(
        airflow,
        "alice",
        "POST",
        f"{sub_path}/skipByMessageIds",
        json={"type": "messageId", "messageIds": [_message_id(m) for m in direct]},
    )
    assert answer.status_code == 204, answer.text

    # A skip waiting for an approval, and one whose gate times out after a minute (of the
    # session Airflow: 10 s): Airflow still lists that one among the unanswered approvals,
    # the page must not.
    ids = [m for m in pick(seeded) if m not in direct]
    run = request_skip(airflow, seeded, ids)
    timed_out = request_skip(airflow, seeded, ids, approval_timeout_minutes=1)

    analysis = rest(airflow, "admin", "GET", f"{sub_path}/analyzeBacklog").json()
    history = rest(airflow, "admin", "GET", f"{sub_path}/backlogHistory").json()
    audit = rest(airflow, "admin", "GET", f"{rest_path(topic)}/auditLog").json()
    stats = rest(airflow, "admin", "GET", f"{rest_path(topic)}/stats").json()
    assert [h["runId"] for h in history] == ["ui-audit-0", "ui-audit-1", "ui-audit-2"]
    counts = [h["messages"] for h in history]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    # The two requests were recorded as planned when they were made, after the direct skip.
    assert [r["kind"] for r in audit] == ["skip-planned", "skip-planned", "skip"]
    assert analysis["messages"] == stats["subscriptions"][SUBSCRIPTION]["msgBacklog"]

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{airflow.base_url}/")
            page.locator("input[name=username]").fill("admin")
            page.locator("input[name=password]").fill(password("admin"))
            page.locator("button[type=submit]").click()
            page.wait_for_url(lambda url: "/auth/login" not in url)

            # Airflow's own navigation has the entry; it opens the page in an iframe.
            page.get_by_role("link", name="Cursors").or_(
                page.get_by_role("button", name="Cursors")
            ).first.click()
            page.wait_for_url(lambda url: "/plugin/cursors" in url)
            frame_element = page.locator("iframe[title=Cursors]")
            frame_element.wait_for()
            assert frame_element.get_attribute("src").endswith(f"{PREFIX}/ui")
            frame = page.frame_locator("iframe[title=Cursors]")

            frame.locator("[data-testid=tenants]").get_by_text(tenant).wait_for()
            frame.locator("#approvals[data-loaded]").wait_for()
            page.screenshot(path=SCREENSHOTS / "ui_cursors_1_tenants.png", full_page=True)

            frame.get_by_role("link", name=tenant, exact=True).click()
            frame.get_by_role("link", name=namespace, exact=True).click()
            topics = frame.locator("[data-testid=topics]")
            topics.get_by_role("link", name=short, exact=True).wait_for()
            page.screenshot(path=SCREENSHOTS / "ui_cursors_2_topics.png", full_page=True)
            topics.get_by_role("link", name=short, exact=True).click()

            backlog = stats["subscriptions"][SUBSCRIPTION]["msgBacklog"]
            cell = frame.locator(f"[data-testid='msgBacklog-{SUBSCRIPTION}']")
            assert cell.inner_text() == grouped(backlog)
            # The direct skip (the timed-out request may have been recorded meanwhile).
            audit_rows = frame.locator("[data-testid=audit-row]").filter(has_text="skip via")
            audit_rows.first.wait_for()
            assert audit_rows.count() == 1
            assert "skip via rest" in audit_rows.first.inner_text()
            assert "alice" in audit_rows.first.inner_text()
            assert f"{len(direct)} skipped" in audit_rows.first.inner_text()
            page.screenshot(path=SCREENSHOTS / "ui_cursors_3_topic.png", full_page=True)

            frame.get_by_role("link", name=SUBSCRIPTION, exact=True).click()
            frame.locator("[data-testid=bar-chart]").wait_for()
            # Per partition: the bar's label and the table equal analyzeBacklog's rows.
            for i, row_json in enumerate(analysis["partitions"]):
                assert row_json["topicPartition"].endswith(f"-partition-{i}")
                value = frame.locator(f"[data-testid='backlog-p{i}']").inner_text()
                assert value == grouped(row_json["messages"])
                bar = frame.locator("[data-testid=bar]").nth(i)
                assert bar.locator(".bar-value").text_content() == grouped(row_json["messages"])
            total = frame.locator("[data-testid=backlog-total]").inner_text()
            assert total == grouped(analysis["messages"])
            assert frame.locator("[data-testid=bar-chart] .axis-label").first.text_content() == (
                "messages"
            )
            # History: one point per recorded run, at its time and count.
            points = frame.locator("[data-testid=history-point]")
            assert points.count() == len(history)
            for k, sample in enumerate(history):
                assert int(points.nth(k).get_attribute("data-messages")) == sample["messages"]
                assert int(points.nth(k).get_attribute("data-at-ms")) == sample["atMs"]
            labels = frame.locator("[data-testid=line-chart] .axis-label").all_text_contents()
            assert labels[0] == "messages" and labels[1].startswith("time (UTC)")
            table = frame.locator("[data-testid=history-table]").inner_text()
            for sample in history:
                assert grouped(sample["messages"]) in table
            # The radar has looked: these messages are fresh and nothing was redelivered.
            frame.locator("[data-testid=radar-none]").wait_for()
            page.screenshot(path=SCREENSHOTS / "ui_cursors_4_subscription.png", full_page=True)
            at_1000(page, "[data-testid=audit-table]", "ui_cursors_4_subscription_1000.png")

            # The run reaches its gate: the page lists it with its preview and the link; the
            # timed-out gate, still unanswered in Airflow's list, is not offered.
            airflow.wait_awaiting_input(DAG, run, GATE)
            assert airflow.wait_run(DAG, timed_out, timeout=600) == "failed"
            assert timed_out in unanswered(airflow)
            reload_frame(page)
            frame.locator("#approvals[data-loaded]").wait_for()
            assert (
                frame.locator(f"[data-testid=approval-row][data-run-id='{timed_out}']").count() == 0
            )
            # Pending approvals: Airflow's hitlDetails, read with the caller's cookie.
            row = frame.locator(f"[data-testid=approval-row][data-run-id='{run}']")
            row.wait_for()
            link = row.locator("a.approve-link")
            assert link.get_attribute("href") == (
                f"/dags/{DAG}/runs/{_quoted(run)}/tasks/{GATE}/required_actions"
            )
            row.locator("summary").click()
            row.get_by_text(f"{len(ids)} id(s)").first.wait_for()
            row.locator(".md table td").first.wait_for()
            # The open preview (wide tables of ids, keys, properties) stays inside the page,
            # and the link to Airflow's approval page stays in sight.
            assert_fits(cursors_frame(page), "a.approve-link")
            page.screenshot(path=SCREENSHOTS / "ui_cursors_5_approval.png", full_page=True)
            at_1000(page, "a.approve-link", "ui_cursors_5_approval_1000.png")

            # bob approves over REST; the audit log then names who asked, who approved, why.
            assert airflow.answer(DAG, run, GATE, "Approve", user="bob").status_code == 200
            assert airflow.wait_run(DAG, run) == "success", airflow.task_states(DAG, run)
            audit = rest(airflow, "admin", "GET", f"{rest_path(topic)}/auditLog").json()
            [request] = [
                r for r in audit if r["kind"] == "skip-request" and r["detail"]["runId"] == run
            ]
            reload_frame(page)
            frame.locator("[data-testid=bar-chart]").wait_for()
            request_row = frame.locator(f"[data-testid=audit-row][data-run-id='{run}']")
            request_row.wait_for()
            text = request_row.inner_text()
            assert request["detail"]["requester"] == "alice" and "alice" in text
            assert request["detail"]["answer"]["by"] == "bob" and "bob" in text
            assert request["detail"]["reason"] in text
            assert request["detail"]["outcome"] == "applied" and "applied" in text
            # The direct skip, the workflow's apply per partition, and the request; a request's
            # planned record is its closing row's (open ones have a block of their own).
            closed = [r for r in audit if not r["kind"].endswith("-planned")]
            assert len(closed) < len(audit)
            assert frame.locator("[data-testid=audit-row]").count() == len(closed)
            after = rest(airflow, "admin", "GET", f"{sub_path}/analyzeBacklog").json()
            assert frame.locator("[data-testid=backlog-total]").inner_text() == grouped(
                after["messages"]
            )
            assert after["messages"] == analysis["messages"] - len(ids)
            frame.locator(f"[data-testid=approval-row][data-run-id='{run}']").wait_for(
                state="detached"
            )
            page.screenshot(path=SCREENSHOTS / "ui_cursors_6_after_approval.png", full_page=True)

            # The same view opened on its own (no iframe): the whole page, audit log included.
            page.goto(f"{airflow.base_url}{PREFIX}/ui#/{tenant}/{namespace}/{short}/{SUBSCRIPTION}")
            page.locator("[data-testid=audit-table]").wait_for()
            assert_fits(page.main_frame, "[data-testid=audit-table]")
            page.screenshot(path=SCREENSHOTS / "ui_cursors_7_page_alone.png", full_page=True)

            # The direct skip's row offers an undo; it asks why, and its messages come back.
            direct_row = page.locator("[data-testid=audit-row]").filter(has_text="skip via rest")
            # A reason beyond Latin-1: the button sends it as an RFC 8187 header value.
            page.once(
                "dialog", lambda dialog: dialog.accept("falsche Bestellungen übersprungen 顧客 🧾")
            )
            direct_row.locator("[data-testid=undo-skip]").click()
            direct_row.get_by_text(f"undone: {len(direct)} message(s) delivered again").wait_for()
            again = rest(airflow, "admin", "GET", f"{sub_path}/analyzeBacklog").json()
            assert again["messages"] == after["messages"] + len(direct)
            page.screenshot(path=SCREENSHOTS / "ui_cursors_8_undo.png", full_page=True)
            page.reload()
            direct_row.locator("[data-testid=undone]").wait_for()
            [undo] = [
                r
                for r in rest(airflow, "admin", "GET", f"{rest_path(topic)}/auditLog").json()
                if r["kind"] == "undo-skip"
            ]
            assert undo["detail"]["via"] == "rest" and undo["role"] == "admin"
        finally:
            browser.close()
            # Leave no unanswered approval on the session's Airflow.
            if timed_out in unanswered(airflow):
                airflow.answer(DAG, timed_out, GATE, "Reject", user="bob")

    for shot in SCREENSHOTS.glob("ui_cursors_*.png"):
        assert shot.stat().st_size > 10_000, shot


@pytest.mark.timeout(900)
def test_a_role_that_may_not_list_tenants_opens_its_topic(airflow: Airflow, cursorops_home):
    """alice holds grants on acme/orders but is no superuser: listing tenants is refused (as
    in Pulsar), and the page offers to open a namespace or topic by name instead."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    seeded = seed_topic(cursorops_home)
    tenant, namespace, short = seeded.topic.removeprefix("persistent://").split("/")
    stats = rest(airflow, "alice", "GET", f"{rest_path(seeded.topic)}/stats").json()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 1000})
            context.add_cookies(
                [{"name": "_token", "value": airflow.token("alice"), "url": airflow.base_url}]
            )
            page = context.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{airflow.base_url}{PREFIX}/ui")
            # No red error: a plain note that listing tenants is for superusers, and the form.
            note = page.locator("#view-body [data-testid=not-superuser]").inner_text()
            assert "Listing tenants is for superusers" in note
            assert page.locator("#view-body [data-testid=error]").count() == 0
            form = page.locator("[data-testid=open-form]")
            form.locator("input").fill(seeded.topic)
            form.locator("button").click()
            cell = page.locator(f"[data-testid='msgBacklog-{SUBSCRIPTION}']")
            assert cell.inner_text() == grouped(stats["subscriptions"][SUBSCRIPTION]["msgBacklog"])
            assert page.url.endswith(f"#/{tenant}/{namespace}/{short}")
            page.screenshot(path=SCREENSHOTS / "ui_cursors_8_no_superuser.png", full_page=True)
        finally:
            browser.close()


@pytest.mark.timeout(900)
def test_the_radar_button_previews_and_skips_only_on_confirm(airflow: Airflow, cursorops_home):
    """A consumer negatively acknowledges two orders three times while it acknowledges every
    other: the radar lists exactly those two. Its button, on a namespace without approval,
    says "skip ... now" and only previews: the count, the backlog before and after, the ids,
    nothing skipped; cancel leaves everything; the preview's confirm skips exactly them."""
    from playwright.sync_api import sync_playwright

    from cursorops.core.services.broker import Broker

    executable = chromium()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    seeded = seed_topic(cursorops_home)
    topic = seeded.topic
    tenant, namespace, short = topic.removeprefix("persistent://").split("/")
    pills = {b"order #20", b"order #33"}
    with Broker(cursorops_home) as broker:
        consumer = broker.reading.dispatcher("admin", topic, SUBSCRIPTION).subscribe(
            "c", receiver_queue_size=100
        )
        for _ in range(3):
            for message in consumer.receive_many(100):
                if message.payload in pills:
                    consumer.negative_acknowledge(message)
                else:
                    consumer.acknowledge(message)
        consumer.close()
    sub_path = f"{rest_path(topic)}/subscription/{SUBSCRIPTION}"
    radar = rest(airflow, "alice", "GET", f"{sub_path}/poisonRadar").json()
    assert sorted(m["redeliveryCount"] for m in radar["listed"]) == [3, 3]
    before = rest(airflow, "alice", "GET", f"{sub_path}/analyzeBacklog").json()["messages"]
    assert before == len(pills) + 3  # the pills are left, and the 3 reminders not yet due

    def skips() -> int:
        audit = rest(airflow, "admin", "GET", f"{rest_path(topic)}/auditLog").json()
        return sum(r["kind"] == "skip" for r in audit)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_cookies(
                [{"name": "_token", "value": airflow.token("alice"), "url": airflow.base_url}]
            )
            page = context.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.on("dialog", lambda dialog: pytest.fail(f"a dialog: {dialog.message}"))
            page.goto(f"{airflow.base_url}{PREFIX}/ui#/{tenant}/{namespace}/{short}/{SUBSCRIPTION}")
            page.locator("[data-testid=radar-table]").wait_for()
            assert page.locator("[data-testid=radar-row]").count() == 2
            button = page.locator("[data-testid=radar-skip]")
            assert button.inner_text() == "skip these 2 now…"
            button.click()
            summary = page.locator("[data-testid=radar-preview-summary]")
            summary.wait_for()
            assert "2 message id(s)" in summary.inner_text()
            assert f"Backlog {before} → {before - 2}" in summary.inner_text()
            page.get_by_text("the 2 id(s)").click()
            shown = page.locator("[data-testid=radar-preview-ids]").inner_text().split()
            assert sorted(shown) == sorted(
                f"{m['partition']}/{m['messageId']}" for m in radar["listed"]
            )
            assert page.locator("[data-testid=radar-confirm]").inner_text() == "skip 2 now"
            page.screenshot(path=SCREENSHOTS / "ui_cursors_radar_preview.png", full_page=True)
            # The preview changed nothing; cancel neither.
            assert (
                rest(airflow, "alice", "GET", f"{sub_path}/analyzeBacklog").json()["messages"]
                == before
            )
            assert skips() == 0
            page.locator("[data-testid=radar-cancel]").click()
            page.locator("[data-testid=radar-preview]").wait_for(state="hidden")
            assert skips() == 0
            # Confirmed: exactly the previewed ids.
            button.click()
            page.locator("[data-testid=radar-confirm]").click()
            page.get_by_text("skipped 2 message id(s)").wait_for()
            page.set_viewport_size({"width": 1000, "height": 1000})
            page.screenshot(path=SCREENSHOTS / "ui_cursors_radar_skipped.png", full_page=True)
        finally:
            browser.close()
    after = rest(airflow, "alice", "GET", f"{sub_path}/analyzeBacklog").json()["messages"]
    assert after == before - 2
    [skip] = [
        r
        for r in rest(airflow, "admin", "GET", f"{rest_path(topic)}/auditLog").json()
        if r["kind"] == "skip"
    ]
    assert skip["role"] == "alice"
    assert sorted(skip["detail"]["skipped"]) == sorted(m["messageId"] for m in radar["listed"])


def unanswered(airflow: Airflow) -> set[str]:
    """The runs Airflow lists as waiting for an answer (``response_received=false``)."""
    found = airflow.get(
        "admin", f"/api/v2/dags/{DAG}/dagRuns/~/hitlDetails?response_received=false&limit=1000"
    )
    return {h["task_instance"]["dag_run_id"] for h in found["hitl_details"]}


def cursors_frame(page: Any) -> Any:
    """The Cursors page's frame inside Airflow's page."""
    [frame] = [f for f in page.frames if f is not page.main_frame and f"{PREFIX}/ui" in f.url]
    return frame


def assert_fits(frame: Any, selector: str) -> None:
    """The page is no wider than its viewport (a wide table scrolls inside its card), and
    ``selector``'s element lies within the viewport's width."""
    page_width, view_width, right = frame.evaluate(
        """(selector) => [
            document.documentElement.scrollWidth,
            document.documentElement.clientWidth,
            document.querySelector(selector).getBoundingClientRect().right,
        ]""",
        selector,
    )
    assert page_width <= view_width, (page_width, view_width)
    assert right <= view_width, (selector, right, view_width)


def at_1000(page: Any, selector: str, screenshot: str) -> None:
    """The same view in a 1,000 px window: it fits, and its screenshot; then 1,400 px again."""
    page.set_viewport_size({"width": 1000, "height": 1000})
    try:
        frame = cursors_frame(page)
        frame.wait_for_function("document.documentElement.clientWidth < 1000")
        assert_fits(frame, selector)
        page.screenshot(path=SCREENSHOTS / screenshot, full_page=True)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


def reload_frame(page: Any) -> None:
    """Reload the Cursors page inside Airflow's iframe, keeping its route (the hash);
    reloading Airflow's page would reset the iframe to the tenants view."""
    cursors_frame(page).evaluate("delete document.body.dataset.loaded; location.reload()")
    page.frame_locator("iframe[title=Cursors]").locator("body[data-loaded]").wait_for()


def _message_id(mid: Any) -> dict[str, int]:
    out = {"ledgerId": mid.ledger_id, "entryId": mid.entry_id}
    if mid.batch_index >= 0:
        out["batchIndex"] = mid.batch_index
    return out


def _quoted(run_id: str) -> str:
    from urllib.parse import quote

    return quote(run_id, safe="")
