"""Pulsar's wire definitions (``PulsarApi.proto``), written out as field tables.

Only the messages and fields cursorops reads or writes; a reader skips the
others, so newer clients' extra fields do no harm. Names are the protocol's
own (``CommandSubscribe``, ``ack_set``, ``consumer_epoch``).
"""

from __future__ import annotations

from enum import IntEnum

from cursorops.wire.proto import MessageType, message


class CommandType(IntEnum):
    """``BaseCommand.Type``: also the field number of the command in ``BaseCommand``."""

    CONNECT = 2
    CONNECTED = 3
    SUBSCRIBE = 4
    PRODUCER = 5
    SEND = 6
    SEND_RECEIPT = 7
    SEND_ERROR = 8
    MESSAGE = 9
    ACK = 10
    FLOW = 11
    UNSUBSCRIBE = 12
    SUCCESS = 13
    ERROR = 14
    CLOSE_PRODUCER = 15
    CLOSE_CONSUMER = 16
    PRODUCER_SUCCESS = 17
    PING = 18
    PONG = 19
    REDELIVER_UNACKNOWLEDGED_MESSAGES = 20
    PARTITIONED_METADATA = 21
    PARTITIONED_METADATA_RESPONSE = 22
    LOOKUP = 23
    LOOKUP_RESPONSE = 24
    CONSUMER_STATS = 25
    CONSUMER_STATS_RESPONSE = 26
    REACHED_END_OF_TOPIC = 27
    SEEK = 28
    GET_LAST_MESSAGE_ID = 29
    GET_LAST_MESSAGE_ID_RESPONSE = 30
    ACTIVE_CONSUMER_CHANGE = 31
    GET_TOPICS_OF_NAMESPACE = 32
    GET_TOPICS_OF_NAMESPACE_RESPONSE = 33
    GET_SCHEMA = 34
    GET_SCHEMA_RESPONSE = 35
    AUTH_CHALLENGE = 36
    AUTH_RESPONSE = 37
    ACK_RESPONSE = 38
    GET_OR_CREATE_SCHEMA = 39
    GET_OR_CREATE_SCHEMA_RESPONSE = 40


class ServerError(IntEnum):
    UnknownError = 0
    MetadataError = 1
    PersistenceError = 2
    AuthenticationError = 3
    AuthorizationError = 4
    ConsumerBusy = 5
    ServiceNotReady = 6
    ChecksumError = 9
    UnsupportedVersionError = 10
    TopicNotFound = 11
    SubscriptionNotFound = 12
    ConsumerNotFound = 13
    TooManyRequests = 14
    TopicTerminatedError = 15
    ProducerBusy = 16
    InvalidTopicName = 17
    IncompatibleSchema = 18
    ConsumerAssignError = 19
    NotAllowedError = 22
    ProducerFenced = 25


class SubType(IntEnum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    Key_Shared = 3


class CompressionType(IntEnum):
    NONE = 0
    LZ4 = 1
    ZLIB = 2
    ZSTD = 3
    SNAPPY = 4


class AckType(IntEnum):
    Individual = 0
    Cumulative = 1


class InitialPosition(IntEnum):
    Latest = 0
    Earliest = 1


class ProducerAccessMode(IntEnum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class TopicsMode(IntEnum):
    """``CommandGetTopicsOfNamespace.Mode``."""

    PERSISTENT = 0
    NON_PERSISTENT = 1
    ALL = 2


class LookupType(IntEnum):
    Redirect = 0
    Connect = 1
    Failed = 2


KeyValue = message("KeyValue", (1, "key", "string"), (2, "value", "string"))
KeyLongValue = message("KeyLongValue", (1, "key", "string"), (2, "value", "uint64"))
EncryptionKeys = message(
    "EncryptionKeys", (1, "key", "string"), (2, "value", "bytes"), (3, "*metadata", KeyValue)
)

_MESSAGE_ID_FIELDS = (
    (1, "ledgerId", "uint64"),
    (2, "entryId", "uint64"),
    (3, "partition", "int32"),
    (4, "batch_index", "int32"),
    (5, "ack_set", "*int64"),
    (6, "batch_size", "int32"),
)
_FirstChunk = message("MessageIdData", *_MESSAGE_ID_FIELDS)
MessageIdData = message(
    "MessageIdData", *_MESSAGE_ID_FIELDS, (7, "first_chunk_message_id", _FirstChunk)
)

Schema = message(
    "Schema",
    (1, "name", "string"),
    (3, "schema_data", "bytes"),
    (4, "type", "enum"),
    (5, "*properties", KeyValue),
)

MessageMetadata = message(
    "MessageMetadata",
    (1, "producer_name", "string"),
    (2, "sequence_id", "uint64"),
    (3, "publish_time", "uint64"),
    (4, "*properties", KeyValue),
    (5, "replicated_from", "string"),
    (6, "partition_key", "string"),
    (7, "replicate_to", "*string"),
    (8, "compression", "enum"),
    (9, "uncompressed_size", "uint32"),
    (11, "num_messages_in_batch", "int32"),
    (12, "event_time", "uint64"),
    (13, "*encryption_keys", EncryptionKeys),
    (14, "encryption_algo", "string"),
    (15, "encryption_param", "bytes"),
    (16, "schema_version", "bytes"),
    (17, "partition_key_b64_encoded", "bool"),
    (18, "ordering_key", "bytes"),
    (19, "deliver_at_time", "int64"),
    (20, "marker_type", "int32"),
    (22, "txnid_least_bits", "uint64"),
    (23, "txnid_most_bits", "uint64"),
    (24, "highest_sequence_id", "uint64"),
    (25, "null_value", "bool"),
    (26, "uuid", "string"),
    (27, "num_chunks_from_msg", "int32"),
    (28, "total_chunk_msg_size", "int32"),
    (29, "chunk_id", "int32"),
    (30, "null_partition_key", "bool"),
)

SingleMessageMetadata = message(
    "SingleMessageMetadata",
    (1, "*properties", KeyValue),
    (2, "partition_key", "string"),
    (3, "payload_size", "int32"),
    (4, "compacted_out", "bool"),
    (5, "event_time", "uint64"),
    (6, "partition_key_b64_encoded", "bool"),
    (7, "ordering_key", "bytes"),
    (8, "sequence_id", "uint64"),
    (9, "null_value", "bool"),
    (10, "null_partition_key", "bool"),
)

FeatureFlags = message(
    "FeatureFlags",
    (1, "supports_auth_refresh", "bool"),
    (2, "supports_broker_entry_metadata", "bool"),
    (3, "supports_partial_producer", "bool"),
    (4, "supports_topic_watchers", "bool"),
)

IntRange = message("IntRange", (1, "start", "int32"), (2, "end", "int32"))

KeySharedMeta = message(
    "KeySharedMeta",
    (1, "keySharedMode", "enum"),
    (3, "*hashRanges", IntRange),
    (4, "allowOutOfOrderDelivery", "bool"),
)

CommandConnect = message(
    "CommandConnect",
    (1, "client_version", "string"),
    (2, "auth_method", "enum"),
    (3, "auth_data", "bytes"),
    (4, "protocol_version", "int32"),
    (5, "auth_method_name", "string"),
    (6, "proxy_to_broker_url", "string"),
    (7, "original_principal", "string"),
    (10, "feature_flags", FeatureFlags),
)
CommandConnected = message(
    "CommandConnected",
    (1, "server_version", "string"),
    (2, "protocol_version", "int32"),
    (3, "max_message_size", "int32"),
    (4, "feature_flags", FeatureFlags),
)
CommandSubscribe = message(
    "CommandSubscribe",
    (1, "topic", "string"),
    (2, "subscription", "string"),
    (3, "subType", "enum"),
    (4, "consumer_id", "uint64"),
    (5, "request_id", "uint64"),
    (6, "consumer_name", "string"),
    (7, "priority_level", "int32"),
    (8, "durable", "bool"),
    (9, "start_message_id", MessageIdData),
    (10, "*metadata", KeyValue),
    (11, "read_compacted", "bool"),
    (12, "schema", Schema),
    (13, "initialPosition", "enum"),
    (14, "replicate_subscription_state", "bool"),
    (15, "force_topic_creation", "bool"),
    (16, "start_message_rollback_duration_sec", "uint64"),
    (17, "keySharedMeta", KeySharedMeta),
    (18, "*subscription_properties", KeyValue),
    (19, "consumer_epoch", "uint64"),
)
CommandPartitionedTopicMetadata = message(
    "CommandPartitionedTopicMetadata",
    (1, "topic", "string"),
    (2, "request_id", "uint64"),
    (6, "metadata_auto_creation_enabled", "bool"),
)
CommandPartitionedTopicMetadataResponse = message(
    "CommandPartitionedTopicMetadataResponse",
    (1, "partitions", "uint32"),
    (2, "request_id", "uint64"),
    (3, "response", "enum"),
    (4, "error", "enum"),
    (5, "message", "string"),
)
CommandLookupTopic = message(
    "CommandLookupTopic",
    (1, "topic", "string"),
    (2, "request_id", "uint64"),
    (3, "authoritative", "bool"),
    (7, "advertised_listener_name", "string"),
)
CommandLookupTopicResponse = message(
    "CommandLookupTopicResponse",
    (1, "brokerServiceUrl", "string"),
    (2, "brokerServiceUrlTls", "string"),
    (3, "response", "enum"),
    (4, "request_id", "uint64"),
    (5, "authoritative", "bool"),
    (6, "error", "enum"),
    (7, "message", "string"),
    (8, "proxy_through_service_url", "bool"),
)
CommandProducer = message(
    "CommandProducer",
    (1, "topic", "string"),
    (2, "producer_id", "uint64"),
    (3, "request_id", "uint64"),
    (4, "producer_name", "string"),
    (5, "encrypted", "bool"),
    (6, "*metadata", KeyValue),
    (7, "schema", Schema),
    (8, "epoch", "uint64"),
    (9, "user_provided_producer_name", "bool"),
    (10, "producer_access_mode", "enum"),
    (11, "topic_epoch", "uint64"),
    (12, "txn_enabled", "bool"),
    (13, "initial_subscription_name", "string"),
)
CommandSend = message(
    "CommandSend",
    (1, "producer_id", "uint64"),
    (2, "sequence_id", "uint64"),
    (3, "num_messages", "int32"),
    (4, "txnid_least_bits", "uint64"),
    (5, "txnid_most_bits", "uint64"),
    (6, "highest_sequence_id", "uint64"),
    (7, "is_chunk", "bool"),
    (8, "marker", "bool"),
    (9, "message_id", MessageIdData),
)
CommandSendReceipt = message(
    "CommandSendReceipt",
    (1, "producer_id", "uint64"),
    (2, "sequence_id", "uint64"),
    (3, "message_id", MessageIdData),
    (4, "highest_sequence_id", "uint64"),
)
CommandSendError = message(
    "CommandSendError",
    (1, "producer_id", "uint64"),
    (2, "sequence_id", "uint64"),
    (3, "error", "enum"),
    (4, "message", "string"),
)
CommandMessage = message(
    "CommandMessage",
    (1, "consumer_id", "uint64"),
    (2, "message_id", MessageIdData),
    (3, "redelivery_count", "uint32"),
    (4, "ack_set", "*int64"),
    (5, "consumer_epoch", "uint64"),
)
CommandAck = message(
    "CommandAck",
    (1, "consumer_id", "uint64"),
    (2, "ack_type", "enum"),
    (3, "*message_id", MessageIdData),
    (4, "validation_error", "enum"),
    (5, "*properties", KeyLongValue),
    (6, "txnid_least_bits", "uint64"),
    (7, "txnid_most_bits", "uint64"),
    (8, "request_id", "uint64"),
)
CommandAckResponse = message(
    "CommandAckResponse",
    (1, "consumer_id", "uint64"),
    (2, "txnid_least_bits", "uint64"),
    (3, "txnid_most_bits", "uint64"),
    (4, "error", "enum"),
    (5, "message", "string"),
    (6, "request_id", "uint64"),
)
CommandActiveConsumerChange = message(
    "CommandActiveConsumerChange", (1, "consumer_id", "uint64"), (2, "is_active", "bool")
)
CommandFlow = message("CommandFlow", (1, "consumer_id", "uint64"), (2, "messagePermits", "uint32"))
CommandUnsubscribe = message(
    "CommandUnsubscribe",
    (1, "consumer_id", "uint64"),
    (2, "request_id", "uint64"),
    (3, "force", "bool"),
)
CommandSeek = message(
    "CommandSeek",
    (1, "consumer_id", "uint64"),
    (2, "request_id", "uint64"),
    (3, "message_id", MessageIdData),
    (4, "message_publish_time", "uint64"),
)
CommandReachedEndOfTopic = message("CommandReachedEndOfTopic", (1, "consumer_id", "uint64"))
CommandCloseProducer = message(
    "CommandCloseProducer", (1, "producer_id", "uint64"), (2, "request_id", "uint64")
)
CommandCloseConsumer = message(
    "CommandCloseConsumer", (1, "consumer_id", "uint64"), (2, "request_id", "uint64")
)
CommandRedeliverUnacknowledgedMessages = message(
    "CommandRedeliverUnacknowledgedMessages",
    (1, "consumer_id", "uint64"),
    (2, "*message_ids", MessageIdData),
    (3, "consumer_epoch", "uint64"),
)
CommandSuccess = message("CommandSuccess", (1, "request_id", "uint64"), (2, "schema", Schema))
CommandProducerSuccess = message(
    "CommandProducerSuccess",
    (1, "request_id", "uint64"),
    (2, "producer_name", "string"),
    (3, "last_sequence_id", "int64"),
    (4, "schema_version", "bytes"),
    (5, "topic_epoch", "uint64"),
    (6, "producer_ready", "bool"),
)
CommandError = message(
    "CommandError", (1, "request_id", "uint64"), (2, "error", "enum"), (3, "message", "string")
)
CommandPing = message("CommandPing")
CommandPong = message("CommandPong")
CommandConsumerStats = message(
    "CommandConsumerStats", (1, "request_id", "uint64"), (4, "consumer_id", "uint64")
)
CommandConsumerStatsResponse = message(
    "CommandConsumerStatsResponse",
    (1, "request_id", "uint64"),
    (2, "error_code", "enum"),
    (3, "error_message", "string"),
    (7, "consumerName", "string"),
    (8, "availablePermits", "uint64"),
    (9, "unackedMessages", "uint64"),
    (13, "type", "string"),
    (15, "msgBacklog", "uint64"),
)
CommandGetLastMessageId = message(
    "CommandGetLastMessageId", (1, "consumer_id", "uint64"), (2, "request_id", "uint64")
)
CommandGetLastMessageIdResponse = message(
    "CommandGetLastMessageIdResponse",
    (1, "last_message_id", MessageIdData),
    (2, "request_id", "uint64"),
    (3, "consumer_mark_delete_position", MessageIdData),
)
CommandGetTopicsOfNamespace = message(
    "CommandGetTopicsOfNamespace",
    (1, "request_id", "uint64"),
    (2, "namespace", "string"),
    (3, "mode", "enum"),
    (4, "topics_pattern", "string"),
    (5, "topics_hash", "string"),
    (6, "*properties", KeyValue),
)
CommandGetTopicsOfNamespaceResponse = message(
    "CommandGetTopicsOfNamespaceResponse",
    (1, "request_id", "uint64"),
    (2, "*topics", "string"),
    (3, "filtered", "bool"),
    (4, "topics_hash", "string"),
    (5, "changed", "bool"),
)
CommandGetSchema = message(
    "CommandGetSchema",
    (1, "request_id", "uint64"),
    (2, "topic", "string"),
    (3, "schema_version", "bytes"),
)
CommandGetSchemaResponse = message(
    "CommandGetSchemaResponse",
    (1, "request_id", "uint64"),
    (2, "error_code", "enum"),
    (3, "error_message", "string"),
    (4, "schema", Schema),
    (5, "schema_version", "bytes"),
)
CommandGetOrCreateSchema = message(
    "CommandGetOrCreateSchema",
    (1, "request_id", "uint64"),
    (2, "topic", "string"),
    (3, "schema", Schema),
)
CommandGetOrCreateSchemaResponse = message(
    "CommandGetOrCreateSchemaResponse",
    (1, "request_id", "uint64"),
    (2, "error_code", "enum"),
    (3, "error_message", "string"),
    (4, "schema_version", "bytes"),
)
AuthData = message("AuthData", (1, "auth_method_name", "string"), (2, "auth_data", "bytes"))
CommandAuthChallenge = message(
    "CommandAuthChallenge",
    (1, "server_version", "string"),
    (2, "challenge", AuthData),
    (3, "protocol_version", "int32"),
)
CommandAuthResponse = message(
    "CommandAuthResponse",
    (1, "client_version", "string"),
    (2, "response", AuthData),
    (3, "protocol_version", "int32"),
)

_BODIES: dict[CommandType, MessageType] = {
    CommandType.CONNECT: CommandConnect,
    CommandType.CONNECTED: CommandConnected,
    CommandType.SUBSCRIBE: CommandSubscribe,
    CommandType.PRODUCER: CommandProducer,
    CommandType.SEND: CommandSend,
    CommandType.SEND_RECEIPT: CommandSendReceipt,
    CommandType.SEND_ERROR: CommandSendError,
    CommandType.MESSAGE: CommandMessage,
    CommandType.ACK: CommandAck,
    CommandType.FLOW: CommandFlow,
    CommandType.UNSUBSCRIBE: CommandUnsubscribe,
    CommandType.SUCCESS: CommandSuccess,
    CommandType.ERROR: CommandError,
    CommandType.CLOSE_PRODUCER: CommandCloseProducer,
    CommandType.CLOSE_CONSUMER: CommandCloseConsumer,
    CommandType.PRODUCER_SUCCESS: CommandProducerSuccess,
    CommandType.PING: CommandPing,
    CommandType.PONG: CommandPong,
    CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES: CommandRedeliverUnacknowledgedMessages,
    CommandType.PARTITIONED_METADATA: CommandPartitionedTopicMetadata,
    CommandType.PARTITIONED_METADATA_RESPONSE: CommandPartitionedTopicMetadataResponse,
    CommandType.LOOKUP: CommandLookupTopic,
    CommandType.LOOKUP_RESPONSE: CommandLookupTopicResponse,
    CommandType.CONSUMER_STATS: CommandConsumerStats,
    CommandType.CONSUMER_STATS_RESPONSE: CommandConsumerStatsResponse,
    CommandType.REACHED_END_OF_TOPIC: CommandReachedEndOfTopic,
    CommandType.SEEK: CommandSeek,
    CommandType.GET_LAST_MESSAGE_ID: CommandGetLastMessageId,
    CommandType.GET_LAST_MESSAGE_ID_RESPONSE: CommandGetLastMessageIdResponse,
    CommandType.ACTIVE_CONSUMER_CHANGE: CommandActiveConsumerChange,
    CommandType.GET_TOPICS_OF_NAMESPACE: CommandGetTopicsOfNamespace,
    CommandType.GET_TOPICS_OF_NAMESPACE_RESPONSE: CommandGetTopicsOfNamespaceResponse,
    CommandType.GET_SCHEMA: CommandGetSchema,
    CommandType.GET_SCHEMA_RESPONSE: CommandGetSchemaResponse,
    CommandType.AUTH_CHALLENGE: CommandAuthChallenge,
    CommandType.AUTH_RESPONSE: CommandAuthResponse,
    CommandType.ACK_RESPONSE: CommandAckResponse,
    CommandType.GET_OR_CREATE_SCHEMA: CommandGetOrCreateSchema,
    CommandType.GET_OR_CREATE_SCHEMA_RESPONSE: CommandGetOrCreateSchemaResponse,
}

BaseCommand = message(
    "BaseCommand",
    (1, "type", "enum"),
    *((int(t), t.name.lower(), body) for t, body in _BODIES.items()),
)
"""The envelope: ``type`` and the one body of that type (field names are the type's,
lower-cased: ``BaseCommand.subscribe`` is ``"subscribe"``)."""


def body_name(command_type: CommandType) -> str:
    """The key of ``command_type``'s body in a decoded :data:`BaseCommand`."""
    return command_type.name.lower()


_KNOWN = frozenset(int(t) for t in _BODIES)


def known(command_type: int) -> bool:
    """Whether cursorops has a definition for ``command_type``."""
    return command_type in _KNOWN
