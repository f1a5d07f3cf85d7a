"""Which body fields name the entities of an exchange (used by :mod:`kwsniff.output.facts`).

Contract: field-name rules derived from the ``entityType`` annotations of Kafka's
message definitions (``topicName``, ``groupId``, ``transactionalId``, ``producerId``),
plus the roles of int and str fields by name.  Data only, shared by the generic facts
walk and the schema-driven walkers of :mod:`kwsniff.output.facts_walk`.
"""

from __future__ import annotations

# Field-name rules derived from the entityType annotations of the message definitions.
TOPIC_KEYS = frozenset({"Topic", "TopicName"})
TOPIC_NAME_PARENTS = frozenset({"Topics", "TopicData", "Responses", "Results", "TopicResults",
                                 "ResultsByTopicV3AndBelow", "V3AndBelowTopics"})
TOPIC_LIST_KEYS = frozenset({"Topics", "TopicNames", "SubscribedTopicNames"})
GROUP_KEYS = frozenset({"GroupId"})
GROUP_LIST_KEYS = frozenset({"Groups", "GroupIds", "GroupsNames"})
TXN_KEYS = frozenset({"TransactionalId", "V3AndBelowTransactionalId"})
TXN_LIST_KEYS = frozenset({"TransactionalIds"})
PARTITION_KEYS = frozenset({"Partition", "PartitionIndex", "PartitionId"})
INDEX_PARENTS = frozenset({"PartitionData", "PartitionResponses", "Partitions"})
PARTITION_LIST_KEYS = frozenset({"PartitionIndexes", "Partitions"})
PRODUCER_KEYS = frozenset({"ProducerId", "V3AndBelowProducerId"})
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
TOPIC_RESOURCE_TYPE = 2   # ConfigResource.Type.TOPIC and AclResourceType.TOPIC

# What an int or str field means to the walk, by its name (the rules above, looked up
# once per name: the walk sees the same few hundred names over and over).
ERROR, PARTITION, INDEX, PRODUCER = 1, 2, 3, 4           # int fields
GROUP, TXN, MEMBER, RESOURCE, COORDINATOR_KEY = 1, 2, 3, 4, 5   # str fields
STR_ROLES: dict[str, int] = {
    **dict.fromkeys(GROUP_KEYS, GROUP), **dict.fromkeys(TXN_KEYS, TXN),
    "MemberId": MEMBER, "ResourceName": RESOURCE, "Key": COORDINATOR_KEY}
INT_ROLES: dict[str, int] = {}
INT_ROLES_LIMIT = 10_000     # field names are schema names; the bound is a safety net


def int_role(key: str) -> int:
    """The role of an int field named ``key`` (remembered in :data:`INT_ROLES`)."""
    if key.endswith("ErrorCode"):
        role = ERROR
    elif key in PARTITION_KEYS:
        role = PARTITION
    elif key == "Index":
        role = INDEX          # a partition index only under INDEX_PARENTS
    elif key in PRODUCER_KEYS:
        role = PRODUCER
    else:
        role = 0
    if len(INT_ROLES) < INT_ROLES_LIMIT:
        INT_ROLES[key] = role
    return role
