"""Redrive a subscription's dead-letter topic: its messages published back to the topic for
that subscription alone (:mod:`core.broker.redrive`). The direct door: on a namespace that
requires approval it is refused (403), nothing applied."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from core.errors import InvalidArgumentError
from cursorops_api.deps import BrokerDep, RoleDep
from cursorops_api.models import RedriveRequest
from cursorops_api.paths import SUBSCRIPTION, topic_name
from cursorops_api.topics import _ERRORS, Namespace, Subscription, Tenant, Topic

router = APIRouter(tags=["persistent topic"])


@router.post(SUBSCRIPTION + "/redrive", responses=_ERRORS)
def redrive(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    role: RoleDep,
    body: Annotated[RedriveRequest | None, Body()] = None,
) -> dict[str, Any]:
    """Publish the subscription's dead-lettered messages (``<topic>-<subscription>-DLQ``, or
    ``deadLetterTopic``; those ``predicate`` matches) back to the topic, acknowledged on its
    other subscriptions and on the dead-letter topic's, in one transaction.

    ``preview``: the plan's counts and first messages, nothing changed. Otherwise the
    outcome: every redriven message's dead-letter id and new id, and the audit record's id.
    """
    request = body or RedriveRequest()
    name = topic_name(tenant, namespace, topic)
    if name.is_partition:
        raise InvalidArgumentError(
            f"Redrive publishes to the whole topic: use '{name.base}', not one partition"
        )
    plan = broker.plan_redrive(
        role,
        name,
        subscription,
        predicate=request.predicate,
        dead_letter=request.dead_letter_topic,
    )
    if request.preview:
        return plan.preview()
    return broker.apply_redrive(role, plan, via="rest").to_json()
