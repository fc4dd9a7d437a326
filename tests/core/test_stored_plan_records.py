"""Plan records stored by earlier releases stay readable, verified and byte for byte the same.

Each row below is a ``plan_records`` row exactly as a release stored it, one per gated
operation (a skip by ids, by matching, of the head and of the whole backlog are all stored
as ``skip``). They were made by planning each operation on a real store and saving the
record as the workflows do, with text that JSON may spell two ways (non-ASCII reasons,
keys, properties and predicates): a plan's content hash and a record's digest are taken
over exact bytes, so a change of spelling would orphan every stored record.

For each row the test inserts it as stored, reads it back through the store, and checks
that its digest verifies, that its plan decodes with the same ``planId``, that dumping the
plan again gives the stored ``plan_json`` exactly, and that creating the record again from
its parts gives the same digest.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import insert

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.plans.plan_record import PlanRecord
from cursorops.core.domain.portable_plan import PortablePlan
from cursorops.core.services.gating.registry import recorded, topics_of, verified_plan
from cursorops.core.store.metadata import MetadataStore
from cursorops.core.store.tables import PlanRecordRow


def stored_plan(record: PlanRecord) -> PortablePlan:
    """The record's plan, decoded as every apply decodes it."""
    return verified_plan(record)


def messages(record: PlanRecord, plan: PortablePlan) -> int:
    return recorded(record.operation).messages(plan)


def created_again(record: PlanRecord, plan: PortablePlan) -> PlanRecord:
    return PlanRecord.create(
        record.binding,
        plan,
        record.document,
        required_approvals=record.required_approvals,
        created_at_ms=record.created_at_ms,
    )


STORED: dict[str, dict[str, Any]] = {
    "skip-messages": {
        "digest": "d6e60026c4ac6ecf68d4800a2d97349ba5cc4dc682165c43c2a28e6b4b645e33",
        "operation": "skip",
        "dag_id": "cursorops_skip_messages",
        "run_id": "manual__2026-01-01T00:00:01+00:00",
        "requester": "alice",
        "role": "alice",
        "topic": "persistent://acme/vault/ledger",
        "subscription": "s",
        "created_at_ms": 1767225604000,
        "plan_id": "ccb28000937e449b9d336f42acd0e88227ed2e47ed1223bddc6c1fb518c624da",
        "plan_json": (
            '{"planId":"ccb28000937e449b9d336f42acd0e88227ed2e47ed1223bddc6c1fb518c624da",'
            '"format":1,"items":[{"alreadyAcknowledged":false,"batchIndex":0,"batchSize":2,'
            '"deliverAt":null,"entryId":0,"ledgerId":2,"partition":0,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"},'
            '{"alreadyAcknowledged":false,"batchIndex":1,"batchSize":2,"deliverAt":null,'
            '"entryId":0,"ledgerId":2,"partition":0,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"},'
            '{"alreadyAcknowledged":false,"batchIndex":0,"batchSize":2,"deliverAt":null,'
            '"entryId":0,"ledgerId":1,"partition":1,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-1"}],"partOf":null,'
            '"plannedAt":1767225603000,"subscription":"s",'
            '"topic":"persistent://acme/vault/ledger"}'
        ),
        "document": (
            '{"alreadyAcknowledged": 0, "backlog": {"after": 6, "before": 9,'
            ' "perPartition": {"persistent://acme/vault/ledger-partition-0": {"after": 1,'
            ' "before": 3, "ids": 2},'
            ' "persistent://acme/vault/ledger-partition-1": {"after": 5, "before": 6,'
            ' "ids": 1}}}, "messages": [{"alreadyAcknowledged": false, "deliverAt": "",'
            ' "id": "2:0:0", "key": "cl\\u00e9-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0",'
            ' "payload": "payload-1 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 0},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "2:0:1",'
            ' "key": "cl\\u00e9-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0",'
            ' "payload": "payload-4 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 0},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "1:0:0",'
            ' "key": "cl\\u00e9-0",'
            ' "partition": "persistent://acme/vault/ledger-partition-1",'
            ' "payload": "payload-0 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 0}],'
            ' "partitions": ["persistent://acme/vault/ledger-partition-0",'
            ' "persistent://acme/vault/ledger-partition-1"],'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "requester": "alice", "role": "alice", "ticket": "OPS-7", "total": 3,'
            ' "totalMessages": 3}'
        ),
        "messages": 3,
        "required_approvals": 1,
    },
    "skip-matching": {
        "digest": "4c30f1bd782b8072960270eb35b1d80ebf7582fdb8c25293fdbfbc77597eba5c",
        "operation": "skip",
        "dag_id": "cursorops_skip_matching",
        "run_id": "manual__2026-01-01T00:00:02+00:00",
        "requester": "alice",
        "role": "alice",
        "topic": "persistent://acme/vault/ledger",
        "subscription": "s",
        "created_at_ms": 1767225606000,
        "plan_id": "67d5416eebb672f25c1005219c10567e2790ab5b236c468ebb7466cd96965ed1",
        "plan_json": (
            '{"planId":"67d5416eebb672f25c1005219c10567e2790ab5b236c468ebb7466cd96965ed1",'
            '"format":1,"items":[{"alreadyAcknowledged":false,"batchIndex":0,"batchSize":2,'
            '"deliverAt":null,"entryId":0,"ledgerId":2,"partition":0,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"},'
            '{"alreadyAcknowledged":false,"batchIndex":1,"batchSize":2,"deliverAt":null,'
            '"entryId":0,"ledgerId":2,"partition":0,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"},'
            '{"alreadyAcknowledged":false,"batchIndex":0,"batchSize":1,"deliverAt":null,'
            '"entryId":1,"ledgerId":2,"partition":0,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"}],"partOf":null,'
            '"plannedAt":1767225605000,"subscription":"s",'
            '"topic":"persistent://acme/vault/ledger"}'
        ),
        "document": (
            '{"alreadyAcknowledged": 0, "backlog": {"after": 6, "before": 9,'
            ' "perPartition": {"persistent://acme/vault/ledger-partition-0": {"after": 0,'
            ' "before": 3, "ids": 3}}}, "messages": [{"alreadyAcknowledged": false,'
            ' "deliverAt": "", "id": "2:0:0", "key": "cl\\u00e9-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0",'
            ' "payload": "payload-1 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 0},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "2:0:1",'
            ' "key": "cl\\u00e9-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0",'
            ' "payload": "payload-4 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 0},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "2:1:0",'
            ' "key": "cl\\u00e9-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0",'
            ' "payload": "payload-7 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 0}],'
            ' "partitions": ["persistent://acme/vault/ledger-partition-0"],'
            ' "predicate": {"key": "cl\\u00e9-1"},'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "requester": "alice", "role": "alice", "ticket": "OPS-7", "total": 3,'
            ' "totalMessages": 3}'
        ),
        "messages": 3,
        "required_approvals": 1,
    },
    "skip-head": {
        "digest": "704eed21dc556db595c0aa2ef7d4bddc4632f5accf5719649c3bb54220f3ae83",
        "operation": "skip",
        "dag_id": "cursorops_skip_head",
        "run_id": "manual__2026-01-01T00:00:03+00:00",
        "requester": "alice",
        "role": "alice",
        "topic": "persistent://acme/vault/ledger",
        "subscription": "s",
        "created_at_ms": 1767225608000,
        "plan_id": "38b3826f7290d37a75edb5c33b50143aa6dcd8aed96599bb12bb02bb89a4d29c",
        "plan_json": (
            '{"planId":"38b3826f7290d37a75edb5c33b50143aa6dcd8aed96599bb12bb02bb89a4d29c",'
            '"format":1,"items":[{"alreadyAcknowledged":false,"batchIndex":-1,'
            '"batchSize":2,"deliverAt":null,"entryId":0,"ledgerId":2,"partition":0,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"},'
            '{"alreadyAcknowledged":false,"batchIndex":-1,"batchSize":2,"deliverAt":null,'
            '"entryId":0,"ledgerId":1,"partition":1,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-1"}],"partOf":null,'
            '"plannedAt":1767225607000,"subscription":"s",'
            '"topic":"persistent://acme/vault/ledger"}'
        ),
        "document": (
            '{"alreadyAcknowledged": 0, "backlog": {"after": 5, "before": 9,'
            ' "perPartition": {"persistent://acme/vault/ledger-partition-0": {"after": 1,'
            ' "before": 3, "ids": 1},'
            ' "persistent://acme/vault/ledger-partition-1": {"after": 4, "before": 6,'
            ' "ids": 1}}}, "head": {"messages": 2},'
            ' "messages": [{"alreadyAcknowledged": false, "deliverAt": "", "id": "2:0",'
            ' "key": "cl\\u00e9-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0",'
            ' "payload": "payload-1 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 2},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "1:0",'
            ' "key": "cl\\u00e9-0",'
            ' "partition": "persistent://acme/vault/ledger-partition-1",'
            ' "payload": "payload-0 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 2}],'
            ' "partitions": ["persistent://acme/vault/ledger-partition-0",'
            ' "persistent://acme/vault/ledger-partition-1"],'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "requester": "alice", "role": "alice", "ticket": "OPS-7", "total": 2,'
            ' "totalMessages": 4}'
        ),
        "messages": 4,
        "required_approvals": 1,
    },
    "clear-backlog": {
        "digest": "27ce9688b399176f8f80cf9c0a1998b4d433eb8736cd5609022f9bdb9b360ab9",
        "operation": "skip",
        "dag_id": "cursorops_skip_head",
        "run_id": "manual__2026-01-01T00:00:04+00:00",
        "requester": "alice",
        "role": "alice",
        "topic": "persistent://acme/vault/ledger",
        "subscription": "s",
        "created_at_ms": 1767225610000,
        "plan_id": "dd16c8f88443b15a0ac2c0143e216f9fc93f70dd6eb6f8424915491ba21f89c1",
        "plan_json": (
            '{"planId":"dd16c8f88443b15a0ac2c0143e216f9fc93f70dd6eb6f8424915491ba21f89c1",'
            '"format":1,"items":[{"alreadyAcknowledged":false,"batchIndex":-1,'
            '"batchSize":2,"deliverAt":null,"entryId":0,"ledgerId":2,"partition":0,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"},'
            '{"alreadyAcknowledged":false,"batchIndex":-1,"batchSize":1,"deliverAt":null,'
            '"entryId":1,"ledgerId":2,"partition":0,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"},'
            '{"alreadyAcknowledged":false,"batchIndex":-1,"batchSize":2,"deliverAt":null,'
            '"entryId":0,"ledgerId":1,"partition":1,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-1"},'
            '{"alreadyAcknowledged":false,"batchIndex":-1,"batchSize":2,"deliverAt":null,'
            '"entryId":1,"ledgerId":1,"partition":1,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-1"},'
            '{"alreadyAcknowledged":false,"batchIndex":-1,"batchSize":1,"deliverAt":null,'
            '"entryId":2,"ledgerId":1,"partition":1,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-1"},'
            '{"alreadyAcknowledged":false,"batchIndex":-1,"batchSize":0,"deliverAt":null,'
            '"entryId":3,"ledgerId":1,"partition":1,'
            '"topicPartition":"persistent://acme/vault/ledger-partition-1"}],"partOf":null,'
            '"plannedAt":1767225609000,"subscription":"s",'
            '"topic":"persistent://acme/vault/ledger"}'
        ),
        "document": (
            '{"alreadyAcknowledged": 0, "backlog": {"after": 0, "before": 9,'
            ' "perPartition": {"persistent://acme/vault/ledger-partition-0": {"after": 0,'
            ' "before": 3, "ids": 2},'
            ' "persistent://acme/vault/ledger-partition-1": {"after": 0, "before": 6,'
            ' "ids": 4}}}, "head": {"messages": null},'
            ' "messages": [{"alreadyAcknowledged": false, "deliverAt": "", "id": "2:0",'
            ' "key": "cl\\u00e9-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0",'
            ' "payload": "payload-1 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 2},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "2:1",'
            ' "key": "cl\\u00e9-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0",'
            ' "payload": "payload-7 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 1},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "1:0",'
            ' "key": "cl\\u00e9-0",'
            ' "partition": "persistent://acme/vault/ledger-partition-1",'
            ' "payload": "payload-0 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 2},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "1:1",'
            ' "key": "cl\\u00e9-0",'
            ' "partition": "persistent://acme/vault/ledger-partition-1",'
            ' "payload": "payload-3 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 2},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "1:2",'
            ' "key": "cl\\u00e9-0",'
            ' "partition": "persistent://acme/vault/ledger-partition-1",'
            ' "payload": "payload-6 \\u00e9", "payloadSize": 12,'
            ' "properties": {"origin": "zo\\u00eb"},'
            ' "publishTime": "2026-01-01T00:00:01.000+00:00", "wholeBatchOf": 1},'
            ' {"alreadyAcknowledged": false, "deliverAt": "", "id": "1:3", "key": "k",'
            ' "partition": "persistent://acme/vault/ledger-partition-1",'
            ' "payload": "single", "payloadSize": 6, "properties": {},'
            ' "publishTime": "2026-01-01T00:00:02.000+00:00", "wholeBatchOf": 0}],'
            ' "partitions": ["persistent://acme/vault/ledger-partition-0",'
            ' "persistent://acme/vault/ledger-partition-1"],'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "requester": "alice", "role": "alice", "ticket": "OPS-7", "total": 6,'
            ' "totalMessages": 9}'
        ),
        "messages": 9,
        "required_approvals": 1,
    },
    "reset-cursor": {
        "digest": "a855318d591d8e9a0a7842f8f9721139c537d29c3b82ab5e113a661c3782b3be",
        "operation": "reset-cursor",
        "dag_id": "cursorops_reset_cursor",
        "run_id": "manual__2026-01-01T00:00:05+00:00",
        "requester": "alice",
        "role": "alice",
        "topic": "persistent://acme/vault/ledger",
        "subscription": "audit",
        "created_at_ms": 1767225612000,
        "plan_id": "ea7cf83c99f36471e5800e3f76d67e20c0447eb4c1d335f233550530a9b90af0",
        "plan_json": (
            '{"format":1,"partitions":[{"backlogAfter":0,"backlogBefore":3,'
            '"markDeleteBefore":"-1:-1",'
            '"partition":"persistent://acme/vault/ledger-partition-0","target":"2:2"},'
            '{"backlogAfter":1,"backlogBefore":6,"markDeleteBefore":"-1:-1",'
            '"partition":"persistent://acme/vault/ledger-partition-1","target":"1:3"}],'
            '"planId":"ea7cf83c99f36471e5800e3f76d67e20c0447eb4c1d335f233550530a9b90af0",'
            '"plannedAt":1767225611000,"subscription":"audit","timestamp":1767225602000,'
            '"topic":"persistent://acme/vault/ledger"}'
        ),
        "document": (
            '{"preview": {"backlogAfter": 1, "backlogBefore": 9,'
            ' "partitions": [{"backlogAfter": 0, "backlogBefore": 3,'
            ' "markDeleteBefore": "-1:-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-0", "target": "2:2"},'
            ' {"backlogAfter": 1, "backlogBefore": 6, "markDeleteBefore": "-1:-1",'
            ' "partition": "persistent://acme/vault/ledger-partition-1", "target": "1:3"}],'
            ' "publishTime": 1767225602000, "resetTo": "publish time"},'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "requester": "alice", "role": "alice", "ticket": "OPS-7"}'
        ),
        "messages": 8,
        "required_approvals": 1,
    },
    "unsubscribe": {
        "digest": "247f970aade79a82b6a68fdd8901d3fa6f26491b7de2fe8f6db3622970088d70",
        "operation": "unsubscribe",
        "dag_id": "cursorops_unsubscribe",
        "run_id": "manual__2026-01-01T00:00:06+00:00",
        "requester": "alice",
        "role": "alice",
        "topic": "persistent://acme/vault/ledger",
        "subscription": "audit",
        "created_at_ms": 1767225614000,
        "plan_id": "c5aec9bb601e7b1b7f7a011990177a8eac72c4cd3faef6d255fc06f50fed091c",
        "plan_json": (
            '{"backlog":[["persistent://acme/vault/ledger-partition-0",3],'
            '["persistent://acme/vault/ledger-partition-1",6]],"force":true,"format":1,'
            '"planId":"c5aec9bb601e7b1b7f7a011990177a8eac72c4cd3faef6d255fc06f50fed091c",'
            '"plannedAt":1767225613000,"subscription":"audit",'
            '"topic":"persistent://acme/vault/ledger"}'
        ),
        "document": (
            '{"preview": {"evenWithConsumersConnected": true, "messagesDropped": 9,'
            ' "partitions": [{"backlog": 3,'
            ' "partition": "persistent://acme/vault/ledger-partition-0"}, {"backlog": 6,'
            ' "partition": "persistent://acme/vault/ledger-partition-1"}],'
            ' "unsubscribe": "audit"},'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "requester": "alice", "role": "alice", "ticket": "OPS-7"}'
        ),
        "messages": 9,
        "required_approvals": 1,
    },
    "undo-skip": {
        "digest": "706e49b77a064572ed8022a489f1d159ba416c6ab321e4f4694d5803613dcf04",
        "operation": "undo-skip",
        "dag_id": "cursorops_undo_skip",
        "run_id": "manual__2026-01-01T00:00:07+00:00",
        "requester": "alice",
        "role": "alice",
        "topic": "persistent://acme/vault/ledger",
        "subscription": "s",
        "created_at_ms": 1767225618000,
        "plan_id": "8bc70317157282fbd737f7f15536f70acd5409f3c580f6d74e48a6870ba3ba8e",
        "plan_json": (
            '{"planId":"8bc70317157282fbd737f7f15536f70acd5409f3c580f6d74e48a6870ba3ba8e",'
            '"format":1,"partitions":[{"ids":["2:0:0","2:0:1"],'
            '"topicPartition":"persistent://acme/vault/ledger-partition-0"},'
            '{"ids":["1:0:0"],'
            '"topicPartition":"persistent://acme/vault/ledger-partition-1"}],'
            '"plannedAt":1767225617000,"skip":{"approvedBy":["bob"],"at":1767225616000,'
            '"by":"alice","reason":"poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            '"ticket":"OPS-7","via":"airflow"},"skipId":7,"stillAcknowledged":3,'
            '"subscription":"s","topic":"persistent://acme/vault/ledger"}'
        ),
        "document": (
            '{"preview": {"approvedBy": ["bob"], "ids": ["2:0:0", "2:0:1", "1:0:0"],'
            ' "idsNotListed": 0, "messages": 3,'
            ' "perPartition": {"persistent://acme/vault/ledger-partition-0": 2,'
            ' "persistent://acme/vault/ledger-partition-1": 1},'
            ' "planId": "8bc70317157282fbd737f7f15536f70acd5409f3c580f6d74e48a6870ba3ba8e",'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "skipId": 7, "skippedAt": 1767225616000, "skippedBy": "alice",'
            ' "skippedVia": "airflow", "stillAcknowledged": 3, "subscription": "s",'
            ' "ticket": "OPS-7", "topic": "persistent://acme/vault/ledger"},'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "requester": "alice", "role": "alice", "ticket": "OPS-7"}'
        ),
        "messages": 3,
        "required_approvals": 1,
    },
    "redrive": {
        "digest": "93d7d5765050837b7942b700e5dc2ba4cf161ce46d446364a42f74de01e2e31a",
        "operation": "redrive",
        "dag_id": "cursorops_redrive",
        "run_id": "manual__2026-01-01T00:00:08+00:00",
        "requester": "alice",
        "role": "alice",
        "topic": "persistent://acme/vault/ledger",
        "subscription": "s",
        "created_at_ms": 1767225622000,
        "plan_id": "37985b1254a349d536fb0470cf970df846e2d0e437bfebd91598ea472e8cf7de",
        "plan_json": (
            '{"deadLetterSubscriptions":[],'
            '"deadLetterTopic":"persistent://acme/vault/ledger-s-DLQ","ids":[[0,4,0,-1],[0,'
            '4,1,-1],[1,3,0,-1],[1,3,1,-1],[1,3,2,-1]],"keys":["clé-1","clé-3","clé-0",'
            '"clé-2","clé-4"],"kind":"redrive","otherSubscriptions":["audit"],'
            '"planId":"37985b1254a349d536fb0470cf970df846e2d0e437bfebd91598ea472e8cf7de",'
            '"plannedAt":1767225621000,"predicate":{"payloadContains":"☠",'
            '"properties":{"raison":"échec"}},"sample":[{"key":"clé-1","messageId":"0/4:0",'
            '"partition":0,"properties":{"raison":"échec"},"publishTime":1767225619000},'
            '{"key":"clé-3","messageId":"0/4:1","partition":0,'
            '"properties":{"raison":"échec"},"publishTime":1767225619000},{"key":"clé-0",'
            '"messageId":"1/3:0","partition":1,"properties":{"raison":"échec"},'
            '"publishTime":1767225619000},{"key":"clé-2","messageId":"1/3:1","partition":1,'
            '"properties":{"raison":"échec"},"publishTime":1767225619000},{"key":"clé-4",'
            '"messageId":"1/3:2","partition":1,"properties":{"raison":"échec"},'
            '"publishTime":1767225619000}],"subscription":"s",'
            '"topic":"persistent://acme/vault/ledger"}'
        ),
        "document": (
            '{"preview": {"deadLetterSubscriptions": [],'
            ' "deadLetterTopic": "persistent://acme/vault/ledger-s-DLQ", "distinctKeys": 5,'
            ' "firstMessages": [{"key": "cl\\u00e9-1", "messageId": "0/4:0",'
            ' "properties": {"raison": "\\u00e9chec"}, "publishTime": 1767225619000},'
            ' {"key": "cl\\u00e9-3", "messageId": "0/4:1",'
            ' "properties": {"raison": "\\u00e9chec"}, "publishTime": 1767225619000},'
            ' {"key": "cl\\u00e9-0", "messageId": "1/3:0",'
            ' "properties": {"raison": "\\u00e9chec"}, "publishTime": 1767225619000},'
            ' {"key": "cl\\u00e9-2", "messageId": "1/3:1",'
            ' "properties": {"raison": "\\u00e9chec"}, "publishTime": 1767225619000},'
            ' {"key": "cl\\u00e9-4", "messageId": "1/3:2",'
            ' "properties": {"raison": "\\u00e9chec"}, "publishTime": 1767225619000}],'
            ' "keyedMessages": 5, "messages": 5, "otherSubscriptions": ["audit"],'
            ' "planId": "37985b1254a349d536fb0470cf970df846e2d0e437bfebd91598ea472e8cf7de",'
            ' "plannedAt": 1767225621000, "predicate": {"payloadContains": "\\u2620",'
            ' "properties": {"raison": "\\u00e9chec"}}, "subscription": "s",'
            ' "topic": "persistent://acme/vault/ledger"},'
            ' "reason": "poison pill: Z\\u00fcrich \\u201corder\\u201d 42 \\u2713",'
            ' "requester": "alice", "role": "alice", "ticket": "OPS-7"}'
        ),
        "messages": 5,
        "required_approvals": 1,
    },
}


def _insert(store: MetadataStore, row: dict[str, Any]) -> None:
    with store.write_engine.begin() as connection:
        connection.execute(
            insert(PlanRecordRow.__table__).values({**row, "document": json.loads(row["document"])})
        )


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_record_verifies_and_its_plan_spells_the_same_bytes(
    metadata_store: MetadataStore, name: str
) -> None:
    row = STORED[name]
    _insert(metadata_store, row)
    record = metadata_store.plans.get(row["digest"])
    assert record is not None
    assert record.verified() is record
    assert (record.digest, record.operation, record.plan_json) == (
        row["digest"],
        row["operation"],
        row["plan_json"],
    )
    plan = stored_plan(record)
    assert plan.plan_id == row["plan_id"]
    assert plan.dumps() == row["plan_json"]
    assert (plan.topic, plan.subscription) == (row["topic"], row["subscription"])
    assert messages(record, plan) == row["messages"]
    assert created_again(record, plan).digest == row["digest"]


def test_a_redrive_record_gates_its_dead_letter_topic_too(metadata_store: MetadataStore) -> None:
    row = STORED["redrive"]
    _insert(metadata_store, row)
    record = metadata_store.plans.get(row["digest"])
    assert record is not None
    assert topics_of(record) == (row["topic"], row["topic"] + "-s-DLQ")


def test_an_altered_stored_record_is_refused(metadata_store: MetadataStore) -> None:
    row = dict(STORED["undo-skip"])
    row["plan_json"] = row["plan_json"].replace('"stillAcknowledged":3', '"stillAcknowledged":0')
    _insert(metadata_store, row)
    record = metadata_store.plans.get(row["digest"])
    assert record is not None
    with pytest.raises(InvalidArgumentError, match="does not match its content"):
        record.verified()
