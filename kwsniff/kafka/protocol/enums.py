"""Enum-like Kafka protocol values, for readable rendering.

Contract: ``ENUMS[name][value] -> label``. Table fields carry the enum name (see
``FieldInfo.enum``); :func:`enum_label` renders a value, falling back to None for
values the enum does not list (special values such as ListOffsets timestamps only
label the sentinels; other values are real data). Never raises.
"""

from __future__ import annotations

from typing import Any

ENUMS: dict[str, dict[Any, str]] = {
    "AclResourceType": {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER",
                        5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"},
    "AclOperation": {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE",
                     6: "DELETE", 7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION",
                     10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE",
                     13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"},
    "AclPermissionType": {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"},
    "AclPatternType": {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"},
    "ConfigResourceType": {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER",
                           16: "CLIENT_METRICS", 32: "GROUP"},
    "ConfigSource": {-1: "UNKNOWN", 0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG",
                     2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                     4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                     6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG",
                     8: "GROUP_CONFIG"},
    "ConfigType": {0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG",
                   6: "DOUBLE", 7: "LIST", 8: "CLASS", 9: "PASSWORD"},
    "IncrementalAlterConfigOp": {0: "SET", 1: "DELETE", 2: "APPEND", 3: "SUBTRACT"},
    "QuotaMatchType": {0: "EXACT", 1: "DEFAULT", 2: "ANY"},
    "IsolationLevel": {0: "READ_UNCOMMITTED", 1: "READ_COMMITTED"},
    "CoordinatorType": {0: "GROUP", 1: "TRANSACTION", 2: "SHARE"},
    "TransactionState": {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
                         4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead",
                         7: "PrepareEpochFence"},
    "TransactionResult": {False: "ABORT", True: "COMMIT"},
    "ControlRecordType": {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                          4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"},
    "LeaderRecoveryState": {0: "RECOVERED", 1: "RECOVERING"},
    "ElectionType": {0: "PREFERRED", 1: "UNCLEAN"},
    "ScramMechanism": {0: "UNKNOWN", 1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"},
    "FeatureUpgradeType": {1: "UPGRADE", 2: "SAFE_DOWNGRADE", 3: "UNSAFE_DOWNGRADE"},
    "ListOffsetsTimestamp": {-1: "LATEST", -2: "EARLIEST", -3: "MAX_TIMESTAMP",
                             -4: "EARLIEST_LOCAL", -5: "LATEST_TIERED"},
    "LeaderAndIsrType": {0: "UNKNOWN", 1: "INCREMENTAL", 2: "FULL"},
    "TimestampType": {-1: "NO_TIMESTAMP_TYPE", 0: "CREATE_TIME", 1: "LOG_APPEND_TIME"},
    "DescribeClusterEndpointType": {1: "BROKERS", 2: "CONTROLLERS"},
}


def enum_label(enum: str | None, value: Any) -> str | None:
    """Label of ``value`` in the named enum, or None (unknown enum or unlisted value)."""
    if enum is None:
        return None
    table = ENUMS.get(enum)
    if table is None:
        return None
    try:
        return table.get(value)
    except TypeError:  # unhashable value (e.g. a list of enum values): nothing to label
        return None
