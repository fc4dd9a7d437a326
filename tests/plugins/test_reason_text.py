"""The REST app reads a request's reason and ticket in any script, over real HTTP machinery:
as RFC 8187 header values (what the CLI and the Cursors page send) or query parameters."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from cursorops.core.domain.header_text import header_value
from cursorops.rest.approval import ApprovalTextDep
from tests.core.test_header_text import SCRIPTS
from tests.dags.conftest import SUBSCRIPTION
from tests.plugins.conftest import Api, rest_path


def test_the_rest_app_reads_the_reason_and_ticket_of_every_door() -> None:
    """Through FastAPI and an HTTP client, as the CLI and the Cursors page send them: RFC
    8187 headers, or query parameters."""
    app = FastAPI()

    @app.get("/echo")
    def echo(text: ApprovalTextDep) -> dict[str, str | None]:
        return {"reason": text.reason, "ticket": text.ticket}

    client = TestClient(app)
    for reason in SCRIPTS[:5]:
        headers = {
            "X-Cursorops-Reason": header_value(reason),
            "X-Cursorops-Ticket": header_value("OPS\u20119"),
        }
        assert client.get("/echo", headers=headers).json() == {
            "reason": reason,
            "ticket": "OPS\u20119",
        }
        by_query = client.get("/echo", params={"reason": reason})
        assert by_query.json() == {"reason": reason, "ticket": None}
    with pytest.raises(UnicodeEncodeError):  # why the doors encode: a raw header cannot
        client.get("/echo", headers={"X-Cursorops-Reason": "顧客"})


def test_a_reason_that_claims_utf8_and_is_not_is_refused_and_changes_nothing(api: Api) -> None:
    seeded = api.seeded()
    path = rest_path(seeded.topic) + f"/subscription/{SUBSCRIPTION}/skipByMessageIds"
    before = api.backlog(seeded.topic)
    answer = api.call(
        "alice",
        "POST",
        path,
        json=[seeded.ids[20].to_base64()],
        headers={"X-Cursorops-Reason": "UTF-8''%FF%FE"},
    )
    assert answer.status_code == 400, answer.text
    assert "X-Cursorops-Reason" in answer.text
    assert api.backlog(seeded.topic) == before
    assert api.audit(seeded.topic) == []
