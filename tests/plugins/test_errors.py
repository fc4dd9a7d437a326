"""The HTTP edge maps every leaf of the error tree, with Pulsar's codes."""

from __future__ import annotations

from cursorops.core.domain import errors as core_errors
from cursorops.core.domain.errors import leaf_classes
from cursorops.rest.errors import STATUS, status_of


def test_every_error_leaf_has_an_http_status() -> None:
    missing = [leaf.__name__ for leaf in leaf_classes() if leaf not in STATUS]
    assert missing == []
    assert set(STATUS.values()) <= {400, 403, 404, 409, 412, 503}


def test_families_and_the_pulsar_specific_leaf() -> None:
    assert status_of(core_errors.InvalidSkipPayloadError("x")) == 400
    assert status_of(core_errors.PositionOutOfRangeError("x")) == 400
    assert status_of(core_errors.SubscriptionNotFoundError("x")) == 404
    assert status_of(core_errors.UnsupportedSubscriptionTypeError("x")) == 409
    assert status_of(core_errors.AlreadyExistsError("x")) == 409
    assert status_of(core_errors.NotAuthorizedError("x")) == 403
    assert status_of(core_errors.MetadataStoreError("x")) == 503
    # Pulsar's deleteSubscription answers PreconditionFailed while consumers are connected.
    assert status_of(core_errors.SubscriptionBusyError("x")) == 412
