"""Redrive a subscription's dead-letter topic: its messages published back to the topic for
that subscription alone (:mod:`core.broker.redrive`). Applied at once, or, on a namespace
that requires approval, handed to the ``cursorops_redrive`` workflow as the caller (202)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from core.errors import ApprovalRequiredError, InvalidArgumentError
from cursorops_api.approval import ApprovalTextDep, start_workflow
from cursorops_api.deps import BrokerDep, RoleDep
from cursorops_api.models import RedriveRequest, SkipTriggered
from cursorops_api.paths import SUBSCRIPTION, topic_name
from cursorops_api.topics import _ERRORS, Namespace, Subscription, Tenant, Topic

router = APIRouter(tags=["persistent topic"])


REDRIVE_DAG = "cursorops_redrive"


@router.post(
    SUBSCRIPTION + "/redrive",
    responses={
        **_ERRORS,
        202: {"model": SkipTriggered, "description": "Waiting for an approval in Airflow"},
    },
)
def redrive(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    request: Request,
    broker: BrokerDep,
    role: RoleDep,
    text: ApprovalTextDep,
    body: Annotated[RedriveRequest | None, Body()] = None,
) -> Any:
    """Publish the subscription's dead-lettered messages (``<topic>-<subscription>-DLQ``, or
    ``deadLetterTopic``; those ``predicate`` matches) back to the topic, acknowledged on its
    other subscriptions and on the dead-letter topic's, in one transaction.

    ``preview``: the plan's counts and first messages, nothing changed. Otherwise the
    outcome: every redriven message's dead-letter id and new id, and the audit record's id.
    """
    asked = body or RedriveRequest()
    name = topic_name(tenant, namespace, topic)
    if name.is_partition:
        raise InvalidArgumentError(
            f"Redrive publishes to the whole topic: use '{name.base}', not one partition"
        )
    plan = broker.plan_redrive(
        role,
        name,
        subscription,
        predicate=asked.predicate,
        dead_letter=asked.dead_letter_topic,
    )
    if asked.preview:
        return plan.preview()
    try:
        return broker.apply_redrive(role, plan, via="rest").to_json()
    except ApprovalRequiredError:
        pass
    conf = {
        "topic": str(name),
        "subscription": subscription,
        "dead_letter_topic": asked.dead_letter_topic,
        "predicate": None if asked.predicate is None else dict(asked.predicate),
    }
    return start_workflow(
        request, name, text, "Redrives", REDRIVE_DAG, conf, gate="approve_redrive"
    )
