"""Realistic Kafka client sessions with ground truth, encoded by kafka-python.

``session(...)`` returns a list of :class:`Step` (request bytes, response bytes or None,
api key, version, correlation id); ``play(sim, steps)`` sends them over a ``Sim``.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from convsim import Sim, kreq, kresp
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.memory_records import MemoryRecordsBuilder


@dataclass
class Step:
    request: bytes
    response: bytes | None
    api_key: int
    version: int
    corr: int
    gap_before: float = 0.0005
    latency: float = 0.002


def records(n: int, size: int = 20, seed: int = 0) -> bytes:
    rnd = random.Random(seed)
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 24)
    for i in range(n):
        b.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i,
                 value=bytes(rnd.getrandbits(8) for _ in range(size)), headers=[])
    b.close()
    return bytes(b.buffer())


def api_versions(corr: int, version: int = 1) -> Step:
    AK = ApiVersionsResponse.ApiVersion
    keys = [AK(api_key=k, min_version=0, max_version=v) for k, v in
            ((0, 9), (1, 12), (2, 7), (3, 12), (8, 8), (9, 8), (10, 4), (12, 4), (18, 3))]
    return Step(kreq(ApiVersionsRequest, version, corr),
                kresp(ApiVersionsResponse, version, corr, error_code=0, api_keys=keys),
                18, version, corr)


def metadata(corr: int, version: int = 1, topics: tuple[tuple[str, uuid.UUID], ...] = ()) -> Step:
    MT = MetadataResponse.MetadataResponseTopic
    MP = MT.MetadataResponsePartition
    MB = MetadataResponse.MetadataResponseBroker
    req_topics = [MetadataRequest.MetadataRequestTopic(name=n) for n, _ in topics]
    rtopics = []
    for name, tid in topics:
        kw = dict(error_code=0, name=name, is_internal=False,
                  partitions=[MP(error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
                                 replica_nodes=[1], isr_nodes=[1], offline_replicas=[])])
        if version >= 10:
            kw["topic_id"] = tid
        rtopics.append(MT(**kw))
    return Step(kreq(MetadataRequest, version, corr, topics=req_topics),
                kresp(MetadataResponse, version, corr,
                      brokers=[MB(node_id=1, host="10.0.0.2", port=9092, rack=None)],
                      controller_id=1, topics=rtopics),
                3, version, corr)


def produce(corr: int, version: int = 3, acks: int = 1, n: int = 3, topic: str = "orders",
            seed: int = 0) -> Step:
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    req = kreq(ProduceRequest, version, corr, transactional_id=None, acks=acks, timeout_ms=1000,
               topic_data=[T(name=topic, partition_data=[P(index=0, records=records(n, seed=seed))])])
    if acks == 0:
        return Step(req, None, 0, version, corr)
    R = ProduceResponse.TopicProduceResponse
    RP = R.PartitionProduceResponse
    resp = kresp(ProduceResponse, version, corr, responses=[
        R(name=topic, partition_responses=[RP(index=0, error_code=0, base_offset=corr,
                                              log_append_time_ms=-1, log_start_offset=0)])])
    return Step(req, resp, 0, version, corr)


def fetch(corr: int, version: int = 4, n: int = 5, topic: str = "orders",
          topic_id: uuid.UUID | None = None, size: int = 20, seed: int = 0) -> Step:
    FT = FetchRequest.FetchTopic
    FP = FT.FetchPartition
    tkw = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    req = kreq(FetchRequest, version, corr, replica_id=-1, max_wait_ms=500, min_bytes=1,
               max_bytes=1 << 20, isolation_level=0,
               topics=[FT(partitions=[FP(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
                          **tkw)])
    FR = FetchResponse.FetchableTopicResponse
    PD = FR.PartitionData
    resp = kresp(FetchResponse, version, corr, throttle_time_ms=0, responses=[
        FR(partitions=[PD(partition_index=0, error_code=0, high_watermark=n, last_stable_offset=n,
                          aborted_transactions=[], records=records(n, size, seed))], **tkw)])
    return Step(req, resp, 1, version, corr, latency=0.01)


def heartbeat(corr: int, version: int = 1) -> Step:
    return Step(kreq(HeartbeatRequest, version, corr, group_id="g1", generation_id=3,
                     member_id="member-1"),
                kresp(HeartbeatResponse, version, corr, error_code=0),
                12, version, corr)


def find_coordinator(corr: int, version: int = 1) -> Step:
    return Step(kreq(FindCoordinatorRequest, version, corr, key="g1", key_type=0),
                kresp(FindCoordinatorResponse, version, corr, error_code=0, error_message=None,
                      node_id=1, host="10.0.0.2", port=9092),
                10, version, corr)


def list_offsets(corr: int, version: int = 1) -> Step:
    LT = ListOffsetsRequest.ListOffsetsTopic
    LP = LT.ListOffsetsPartition
    RT = ListOffsetsResponse.ListOffsetsTopicResponse
    RP = RT.ListOffsetsPartitionResponse
    return Step(kreq(ListOffsetsRequest, version, corr, replica_id=-1,
                     topics=[LT(name="orders", partitions=[LP(partition_index=0, timestamp=-1)])]),
                kresp(ListOffsetsResponse, version, corr,
                      topics=[RT(name="orders", partitions=[RP(partition_index=0, error_code=0,
                                                               timestamp=-1, offset=42)])]),
                2, version, corr)


def session(n: int = 30, seed: int = 1, start_corr: int = 1, big_fetch: int = 0) -> list[Step]:
    """A consumer/producer mix: ApiVersions, Metadata, then a random mix of APIs."""
    rnd = random.Random(seed)
    corr = start_corr
    steps = [api_versions(corr), metadata(corr + 1, topics=(("orders", uuid.uuid4()),))]
    corr += 2
    makers = [lambda c: produce(c, seed=c), lambda c: fetch(c, seed=c, size=big_fetch or 20),
              heartbeat, find_coordinator, list_offsets, lambda c: produce(c, acks=0, seed=c)]
    for _ in range(n):
        steps.append(rnd.choice(makers)(corr))
        corr += 1
    return steps


def play(sim: Sim, steps: list[Step], pipeline: bool = False) -> None:
    """Send the steps: request, wait, response (or all requests then responses)."""
    if pipeline:
        for st in steps:
            sim.wait(st.gap_before)
            sim.c(st.request)
        for st in steps:
            if st.response is not None:
                sim.wait(st.latency)
                sim.s(st.response)
        return
    for st in steps:
        sim.wait(st.gap_before)
        sim.c(st.request)
        if st.response is not None:
            sim.wait(st.latency)
            sim.s(st.response)
