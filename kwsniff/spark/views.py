"""The body views the analyses parse (see :mod:`kwsniff.spark.bodies`).

Each constant is ``(api_key, kind, struct)``; field names are those of Kafka's message
definitions, union over every version (e.g. Fetch topics are named ``Topic`` up to v12
and carry ``TopicId`` plus kwsniff's ``_topic_name`` from v13).
"""

from __future__ import annotations

from pyspark.sql import types as T

from kwsniff.spark.bodies import message_view

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT = 0, 1, 2, 8
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT = 28, 68

_TOPIC = {"_topic_name": None}

PRODUCE_REQUEST: T.StructType = message_view(PRODUCE, "request", {
    "TransactionalId": None, "Acks": None,
    "TopicData": {"Name": None, "TopicId": None, **_TOPIC,
                  "PartitionData": {"Index": None, "Records": None}}})

FETCH_REQUEST: T.StructType = message_view(FETCH, "request", {
    "ReplicaId": None, "ReplicaState": {"ReplicaId": None}, "IsolationLevel": None,
    "Topics": {"Topic": None, "TopicId": None, **_TOPIC,
               "Partitions": {"Partition": None, "FetchOffset": None}}})

FETCH_RESPONSE: T.StructType = message_view(FETCH, "response", {
    "Responses": {"Topic": None, "TopicId": None, **_TOPIC,
                  "Partitions": {"PartitionIndex": None, "ErrorCode": None,
                                 "HighWatermark": None, "LastStableOffset": None,
                                 "AbortedTransactions": {"ProducerId": None},
                                 "Records": None}}})

JOIN_GROUP_REQUEST: T.StructType = message_view(JOIN_GROUP, "request", {
    "GroupId": None, "MemberId": None, "GroupInstanceId": None, "ProtocolType": None})

JOIN_GROUP_RESPONSE: T.StructType = message_view(JOIN_GROUP, "response", {
    "ErrorCode": None, "GenerationId": None, "ProtocolName": None, "Leader": None,
    "MemberId": None, "Members": {"MemberId": None}})

SYNC_GROUP_REQUEST: T.StructType = message_view(SYNC_GROUP, "request", {
    "GroupId": None, "GenerationId": None, "MemberId": None})

SYNC_GROUP_RESPONSE: T.StructType = message_view(SYNC_GROUP, "response", {
    "ErrorCode": None,
    "_decoded_Assignment": {"ConsumerProtocolAssignment": {
        "AssignedPartitions": {"Topic": None, "Partitions": None}}}})

LEAVE_GROUP_REQUEST: T.StructType = message_view(LEAVE_GROUP, "request", {
    "GroupId": None, "MemberId": None, "Members": {"MemberId": None, "Reason": None}})

ERROR_ONLY: dict[int, T.StructType] = {
    key: message_view(key, "response", {"ErrorCode": None})
    for key in (LEAVE_GROUP, HEARTBEAT, ADD_OFFSETS_TO_TXN, END_TXN)}

CONSUMER_GROUP_HEARTBEAT_REQUEST: T.StructType = message_view(
    CONSUMER_GROUP_HEARTBEAT, "request", {"GroupId": None, "MemberId": None,
                                          "MemberEpoch": None})

CONSUMER_GROUP_HEARTBEAT_RESPONSE: T.StructType = message_view(
    CONSUMER_GROUP_HEARTBEAT, "response", {"ErrorCode": None, "MemberId": None,
                                           "MemberEpoch": None})

_COMMIT_TOPICS = {"Name": None, "TopicId": None, **_TOPIC,
                  "Partitions": {"PartitionIndex": None, "CommittedOffset": None}}

OFFSET_COMMIT_REQUEST: T.StructType = message_view(OFFSET_COMMIT, "request", {
    "GroupId": None, "GenerationIdOrMemberEpoch": None, "MemberId": None,
    "Topics": _COMMIT_TOPICS})

OFFSET_COMMIT_RESPONSE: T.StructType = message_view(OFFSET_COMMIT, "response", {
    "Topics": {"Name": None, "TopicId": None, **_TOPIC,
               "Partitions": {"PartitionIndex": None, "ErrorCode": None}}})

TXN_OFFSET_COMMIT_REQUEST: T.StructType = message_view(TXN_OFFSET_COMMIT, "request", {
    "TransactionalId": None, "GroupId": None, "ProducerId": None, "ProducerEpoch": None,
    "GenerationId": None, "MemberId": None,
    "Topics": {"Name": None, "Partitions": {"PartitionIndex": None, "CommittedOffset": None}}})

TXN_OFFSET_COMMIT_RESPONSE: T.StructType = message_view(TXN_OFFSET_COMMIT, "response", {
    "Topics": {"Name": None, "Partitions": {"PartitionIndex": None, "ErrorCode": None}}})

INIT_PRODUCER_ID_REQUEST: T.StructType = message_view(INIT_PRODUCER_ID, "request", {
    "TransactionalId": None, "ProducerId": None, "ProducerEpoch": None})

INIT_PRODUCER_ID_RESPONSE: T.StructType = message_view(INIT_PRODUCER_ID, "response", {
    "ErrorCode": None, "ProducerId": None, "ProducerEpoch": None})

_TXN_TOPICS = {"Name": None, "Partitions": None}

ADD_PARTITIONS_TO_TXN_REQUEST: T.StructType = message_view(ADD_PARTITIONS_TO_TXN, "request", {
    "V3AndBelowTransactionalId": None, "V3AndBelowProducerId": None,
    "V3AndBelowProducerEpoch": None, "V3AndBelowTopics": _TXN_TOPICS,
    "Transactions": {"TransactionalId": None, "ProducerId": None, "ProducerEpoch": None,
                     "VerifyOnly": None, "Topics": _TXN_TOPICS}})

ADD_PARTITIONS_TO_TXN_RESPONSE: T.StructType = message_view(ADD_PARTITIONS_TO_TXN, "response", {
    "ErrorCode": None})

ADD_OFFSETS_TO_TXN_REQUEST: T.StructType = message_view(ADD_OFFSETS_TO_TXN, "request", {
    "TransactionalId": None, "ProducerId": None, "ProducerEpoch": None, "GroupId": None})

END_TXN_REQUEST: T.StructType = message_view(END_TXN, "request", {
    "TransactionalId": None, "ProducerId": None, "ProducerEpoch": None, "Committed": None})
