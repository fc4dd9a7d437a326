"""Every preview type as the Cursors page shows it, in a real browser at 1,400 and 1,000 px:
the approver's Markdown of each gated operation (skip by ids, by predicate, of the head,
clear-backlog, reset, unsubscribe, undo of a skip, redrive), planned on a real store,
rendered by the page's own ``markdown()`` inside the approvals table as the page lays it
out. Each stays inside its card and the page, hides nothing, and is screenshotted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.legible import HIDDEN
from cursorops.core.domain.plans.plan_record import PlanRecord
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import Pending, UndoSkip
from cursorops.core.services.gating.approval_text import preview_markdown
from cursorops.core.services.producer import OutgoingMessage
from tests.core.test_gated_requests import ALICE, REQUESTS, SUB, VAULT, Runs
from tests.dags.test_ui_approval import SCREENSHOTS, chromium
from tests.plugins.conftest import Api
from tests.plugins.test_ui_hostile import MEASURE, fits, opened, served

pytestmark = [pytest.mark.slow]

__all__ = ["served"]

WIDTHS = (1400, 1000)


def _pending(broker: Broker, operation: str, arguments: object) -> PlanRecord:
    made = broker.request(operation, ALICE, arguments, Runs())  # type: ignore[arg-type]
    assert isinstance(made, Pending)
    return made.record


@pytest.fixture(scope="module")
def previews(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each operation's preview Markdown, content shown (the Cursors page's reader may peek),
    on an approval namespace's topic of 10 keyed messages and a dead-letter topic of 3."""
    home = tmp_path_factory.mktemp("previews") / "home"
    with Broker(Config.from_home(home)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/vault")
        broker.admin.grant_permission("admin", "acme/vault", "alice", ["produce", "consume"])
        broker.admin.create_topic("admin", VAULT)
        broker.admin.create_subscription(
            "admin", VAULT, SUB, SubscriptionType.SHARED, initial_position="earliest"
        )
        messages = [
            OutgoingMessage(b"order %d" % i, key=f"customer-{i}", properties={"n": str(i)})
            for i in range(10)
        ]
        broker.producing.produce("admin", VAULT, messages, batch_size=2)
        broker.admin.create_topic("admin", f"{VAULT}-{SUB}-DLQ")
        dead = [OutgoingMessage(b"dead", key="k") for _ in range(3)]
        broker.producing.produce("admin", f"{VAULT}-{SUB}-DLQ", dead)
        broker.admin.set_namespace_policy("admin", "acme/vault", skip_requires_approval=True)
        out = {
            operation: preview_markdown(
                _pending(broker, operation, REQUESTS[operation](broker, VAULT)), content=True
            )
            for operation in sorted(REQUESTS)
        }
        skip = _pending(broker, "skip-messages", REQUESTS["skip-messages"](broker, VAULT))
        broker.apply_approved_plan(skip, [{"approver": "bob"}])
        [audit] = broker.workflow.audit_log("admin", VAULT, kind="skip")
        undo = UndoSkip(topic=VAULT, subscription=SUB, skip_id=audit.id, reason="wrong ids")
        out["undo-skip"] = preview_markdown(_pending(broker, "undo-skip", undo), content=True)
    yield out


def test_every_preview_type_fits_at_both_widths(
    api: Api, served: str, previews: dict[str, str]
) -> None:
    from playwright.sync_api import sync_playwright

    assert len(previews) == 8
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True)
        try:
            for width in WIDTHS:
                page = opened(browser, api, served, width, "#/")
                for operation, markdown in previews.items():
                    page.evaluate(
                        """(md) => {
                          document.getElementById("view-body").innerHTML =
                            `<div class="card"><table data-testid="approvals-table"><tbody><tr>` +
                            `<td class="when">2026-01-01 00:00</td><td><strong>request</strong>` +
                            `<details class="preview" open><summary>Preview</summary>` +
                            `<div class="md">${markdown(md)}</div></details></td></tr>` +
                            `</tbody></table></div>`;
                        }""",
                        markdown,
                    )
                    shown = page.locator("#view-body .md").inner_text()
                    # The sections every preview has, in the page as in Airflow's.
                    for section in ("Effect", "Per partition", "Details"):
                        assert section in shown, (operation, shown[:400])
                    fits(page.evaluate(f"HIDDEN => ({MEASURE})()", sorted(HIDDEN)), width)
                    shot = SCREENSHOTS / f"ui_preview_{operation}_{width}.png"
                    page.screenshot(path=shot, full_page=True)
                    assert shot.stat().st_size > 10_000, shot
                page.context.close()
        finally:
            browser.close()
