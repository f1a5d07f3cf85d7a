"""API version caps for the benchmark brokers: the versions tshark 4.0 decodes.

tshark 4.0's Kafka dissector covers Kafka 0.8 - 2.5: current clients use newer
versions (librdkafka 2.x sends Produce v10, Fetch v16, Metadata v13), which tshark shows
as "Unsupported version" / "Malformed Packet" without decoding the bodies or records.
A benchmark against that would compare kwsniff's full decode with tshark skipping the
work, so the mock brokers advertise at most the Kafka 2.5 versions below (librdkafka's
``rd_kafka_mock_set_apiversion``) and APIs newer than 2.5 not at all; the clients then
use those versions, and both tools decode every body and record.
"""

from __future__ import annotations

import ctypes

from pcapgen.brokers import MockCluster

#: api key -> highest version of Kafka 2.5 (what tshark 4.0 decodes), for the APIs
#: where both librdkafka 2.16 and its mock go further (the others already stay within)
KAFKA_2_5_MAX: dict[int, int] = {
    0: 8,    # Produce (librdkafka would use v10)
    1: 11,   # Fetch (v16)
    2: 5,    # ListOffsets (v7)
    3: 9,    # Metadata (v13)
    8: 8,    # OffsetCommit (v9)
    22: 3,   # InitProducerId (v4; idempotent producers of the mixed capture)
}
#: APIs the mock knows that Kafka 2.5 did not have (not advertised)
NEWER_APIS = (60, 68, 71, 72)   # DescribeCluster, ConsumerGroupHeartbeat, telemetry


class CappedMockCluster(MockCluster):
    """The sample captures' mock cluster with API versions capped (see module doc)."""

    def cap_api_versions(self, caps: dict[int, int] = KAFKA_2_5_MAX,
                         hidden: tuple[int, ...] = NEWER_APIS) -> None:
        fn = self._lib.rd_kafka_mock_set_apiversion
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int16, ctypes.c_int16, ctypes.c_int16]
        for key, top in caps.items():
            self._check(fn(self._mc, key, 0, top), f"cap api {key} at v{top}")
        for key in hidden:
            self._check(fn(self._mc, key, -1, -1), f"hide api {key}")
