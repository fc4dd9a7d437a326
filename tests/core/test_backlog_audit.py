"""Threshold logic of the backlog audit (cursorops.core.domain.analysis.backlog_audit), against a
plain model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.analysis.backlog_audit import (
    BacklogSample,
    Limits,
    Measure,
    Thresholds,
    check,
    growth_per_hour,
    latest_before,
    namespace_of,
)
from cursorops.core.domain.errors import InvalidArgumentError

T1 = "persistent://acme/orders/events"
T2 = "persistent://acme/billing/invoices"


def sample(topic=T1, sub="s", at=3_600_000, messages=0, oldest=None, run="r2") -> BacklogSample:
    return BacklogSample(topic, sub, at, messages, messages, oldest, run)


def test_most_specific_limit_wins_field_by_field():
    thresholds = Thresholds.from_json(
        {
            "defaults": {"maxMessages": 100, "maxAgeSeconds": 60, "maxGrowthPerHour": 10},
            "namespaces": {"acme/orders": {"maxMessages": 50}},
            "subscriptions": {T1: {"billing": {"maxAgeSeconds": 5}}},
        }
    )
    assert thresholds.limits_for(T1, "billing") == Limits(50, 5, 10)
    assert thresholds.limits_for(T1, "other") == Limits(50, 60, 10)
    assert thresholds.limits_for(T2, "billing") == Limits(100, 60, 10)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "expected a JSON object"),
        ({"default": {}}, "unknown default"),
        ({"defaults": {"maxMessage": 1}}, "defaults: unknown maxMessage"),
        ({"defaults": {"maxMessages": -1}}, "defaults.maxMessages must be an integer >= 0"),
        ({"defaults": {"maxMessages": True}}, "must be an integer"),
        ({"namespaces": {"acme": {}}}, "namespace 'acme' must be tenant/namespace"),
        ({"subscriptions": {T1: {"s": {"maxAgeSeconds": "1h"}}}}, "maxAgeSeconds must be"),
        ({"subscriptions": {"events": {}}}, "Invalid topic 'events'"),
    ],
)
def test_bad_thresholds_are_one_line_errors(document, message):
    with pytest.raises(InvalidArgumentError, match=message) as raised:
        Thresholds.from_json(document)
    assert "\n" not in str(raised.value)


def test_each_measure_breaches_strictly_above_its_limit():
    limits = Thresholds(Limits(max_messages=10, max_age_s=60, max_growth=100))
    at = 10 * 3_600_000
    previous = {(T1, "s"): sample(at=at - 3_600_000, messages=0, run="r1")}
    at_limit = sample(at=at, messages=10, oldest=at - 60_000)
    assert check([at_limit], {}, limits) == []
    over = sample(at=at, messages=101, oldest=at - 60_001)
    found = check([over], previous, limits)
    assert [(b.measure, b.value, b.limit) for b in found] == [
        (Measure.MESSAGES, 101.0, 10),
        (Measure.AGE, 60.001, 60),
        (Measure.GROWTH, 101.0, 100),
    ]
    assert found[0].describe() == f"{T1} / s: 101 messages > 10"


def test_growth_needs_an_earlier_sample():
    now = sample(at=7_200_000, messages=30)
    assert growth_per_hour(None, now) is None
    assert growth_per_hour(sample(at=7_200_000, messages=0), now) is None
    assert growth_per_hour(sample(at=5_400_000, messages=0), now) == 60.0
    assert growth_per_hour(sample(at=0, messages=50), now) == -10.0


def test_latest_before_ignores_this_run():
    history = [
        sample(at=1, messages=1, run="a"),
        sample(at=2, messages=2, run="b"),
        sample(at=3, messages=3, run="c"),
    ]
    assert latest_before(history, "c")[(T1, "s")].messages == 2
    assert latest_before(history, "x")[(T1, "s")].messages == 3


def test_namespace_of():
    assert namespace_of(T1) == "acme/orders"
    with pytest.raises(InvalidArgumentError):
        namespace_of("persistent://acme")


limit_values = st.one_of(st.none(), st.integers(0, 1000))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([T1, T2]),
            st.sampled_from(["a", "b"]),
            st.integers(0, 2000),
            st.one_of(st.none(), st.integers(0, 3_600_000)),
            st.one_of(st.none(), st.integers(0, 2000)),
        ),
        max_size=8,
    ),
    st.tuples(limit_values, limit_values, limit_values),
    st.tuples(limit_values, limit_values, limit_values),
    st.tuples(limit_values, limit_values, limit_values),
)
def test_check_matches_a_plain_model(rows, default, namespace, subscription):
    now = 10 * 3_600_000
    thresholds = Thresholds(
        Limits(*default),
        {"acme/orders": Limits(*namespace)},
        {(T1, "a"): Limits(*subscription)},
    )
    samples, previous = [], {}
    for topic, sub, messages, age, earlier in rows:
        one = BacklogSample(topic, sub, now, messages, messages, None if age is None else now - age)
        samples.append(one)
        if earlier is not None:
            previous[(topic, sub)] = BacklogSample(
                topic, sub, now - 1_800_000, earlier, earlier, None
            )

    expected = []
    for one in samples:
        chain = [default]
        if one.topic == T1:
            chain.insert(0, namespace)
            if one.subscription == "a":
                chain.insert(0, subscription)
        limit = [next((c[i] for c in chain if c[i] is not None), None) for i in range(3)]
        before = previous.get((one.topic, one.subscription))
        values = [
            one.messages,
            None if one.oldest_publish_ms is None else (now - one.oldest_publish_ms) / 1000,
            None if before is None else (one.messages - before.messages) * 2,
        ]
        for measure, value, bound in zip(Measure, values, limit, strict=True):
            if value is not None and bound is not None and value > bound:
                expected.append((one.topic, one.subscription, measure, bound))
    got = [
        (b.topic, b.subscription, b.measure, b.limit) for b in check(samples, previous, thresholds)
    ]
    assert got == expected
