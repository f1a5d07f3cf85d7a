"""Admin APIs (confluent-kafka AdminClient and kafka-python KafkaAdminClient) against
Tansu, plus a produce/consume round trip with a consumer group."""

from __future__ import annotations

import gc
import time
from typing import Any, Callable

import kafka
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, NewPartitions, NewTopic, OffsetSpec,
                                   ResourceType)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from ..brokers import TansuBroker
from ..clients import CK_VERSION, LIBRDKAFKA_VERSION, RdkConsumer, RdkProducer
from ..context import ScenarioContext, ScenarioFailed
from ..payloads import order_json
from . import Scenario

TANSU_PORT = 19992
GROUP = "admin-group"


def _err(exc: BaseException) -> dict[str, str]:
    if isinstance(exc, KafkaException) and exc.args:
        kerr = exc.args[0]
        return {"error": kerr.name(), "message": kerr.str()}
    return {"error": type(exc).__name__, "message": str(exc)}


def _futures(fs: dict[Any, Any], fmt: Callable[[Any], Any] = lambda r: r) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, fut in fs.items():
        name = getattr(key, "name", None) or getattr(key, "topic", None) or str(key)
        if isinstance(key, CkTopicPartition):
            name = f"{key.topic}[{key.partition}]"
        try:
            out[str(name)] = {"ok": fmt(fut.result(30))}
        except Exception as exc:
            out[str(name)] = _err(exc)
    return out


class Admin:
    """Runs admin calls and records each one in the manifest."""

    def __init__(self, ctx: ScenarioContext, client_id: str) -> None:
        self.ctx = ctx
        self.client_id = client_id

    def op(self, operation: str, api: str | None, arguments: Any,
           call: Callable[[], Any], sent: bool = True) -> Any:
        """Run ``call``; ``api`` is the API the operation is expected to use (the
        requests really sent in the meantime are filled in by :func:`attach_requests`)."""
        before = self.ctx.request_marker()
        try:
            result = call()
        except Exception as exc:
            result = _err(exc)
        self.ctx.manifest.admin(client_id=self.client_id, operation=operation, api=api,
                                arguments=arguments, result=result, sent=sent)
        self.ctx.manifest.data["admin_operations"][-1]["_marks"] = (
            before, self.ctx.request_marker())
        return result


_HOUSEKEEPING = {"ApiVersions", "Metadata", "FindCoordinator", "GetTelemetrySubscriptions"}


def attach_requests(doc: dict[str, Any]) -> None:
    """Give every admin operation the requests its client logged while it ran.

    ``api`` becomes the operation's main request as observed (e.g. librdkafka
    describes consumer groups with ConsumerGroupDescribe when the broker offers it, and
    answers describe_cluster from Metadata);
    an operation marked not sent must have logged no request of its declared API.
    """
    for op in doc["admin_operations"]:
        (log0, seq0), (log1, seq1) = op.pop("_marks")
        seen = [r for r in doc["requests"] if r["client_id"] == op["client_id"]
                and (log0 <= r.get("_log_offset", -1) < log1
                     or seq0 <= r.get("_seq", -1) < seq1)]
        op["requests"] = [{"api_name": r["api_name"], "api_version": r["api_version"],
                           "correlation_id": r["correlation_id"]} for r in seen]
        main = [r["api_name"] for r in seen if r["api_name"] not in _HOUSEKEEPING]
        if not op["sent"]:
            if op["api"] in main:
                raise ScenarioFailed(f"{op['operation']} was sent after all")
        elif main:
            op["api"] = main[0]
        elif any(r["api_name"] == "Metadata" for r in seen):
            op["api"] = "Metadata"  # e.g. librdkafka's describe_cluster / describe_topics
        else:
            raise ScenarioFailed(f"{op['client_id']} {op['operation']}: no request logged")


def _configs(res: dict[str, Any]) -> dict[str, Any]:
    return {name: entry.value for name, entry in sorted(res.items())}


def run(ctx: ScenarioContext) -> None:
    log = open(ctx.work_dir / "tansu.log", "wb")
    with TansuBroker(TANSU_PORT, log) as tansu:
        bs = tansu.bootstrap_servers
        ctx.manifest.note("Tansu runs in memory (--storage-engine memory://tansu/)")
        with ctx.capture([TANSU_PORT]):
            conf = ctx.rdkafka_conf(bs, "tansu-admin")
            ck = AdminClient(conf)
            ctx.manifest.add_client(client_id="tansu-admin", library="confluent-kafka",
                                    library_version=CK_VERSION,
                                    librdkafka_version=LIBRDKAFKA_VERSION,
                                    role="admin (AdminClient)", config={})
            a = Admin(ctx, "tansu-admin")

            before = ctx.request_marker()
            cluster = ck.describe_cluster().result(30)
            nodes = [(n.id, n.port) for n in cluster.nodes]
            a.op("describe_cluster", "DescribeCluster", {},
                 lambda: {"cluster_id": cluster.cluster_id,
                          "controller": cluster.controller.id if cluster.controller else None,
                          "nodes": [{"id": i, "port": p} for i, p in nodes]})
            ctx.manifest.data["admin_operations"][-1]["_marks"] = (before,
                                                                   ctx.request_marker())
            for node_id, port in nodes:
                ctx.node_ports[str(node_id)] = port
                ctx.manifest.add_broker(software=tansu.software, version=tansu.version,
                                        node_id=node_id, host="127.0.0.1", port=port)
            if [p for _, p in nodes] != [TANSU_PORT]:
                raise ScenarioFailed(f"unexpected Tansu nodes {nodes}")

            new = [NewTopic("admin-orders", 3, 1), NewTopic("admin-scratch", 1, 1),
                   NewTopic("admin-compacted", 1, 1,
                            config={"cleanup.policy": "compact", "retention.ms": "86400000"})]
            a.op("create_topics", "CreateTopics",
                 [{"name": t.topic, "partitions": t.num_partitions, "config": t.config}
                  for t in new],
                 lambda: _futures(ck.create_topics(new, operation_timeout=10)))
            for t in new:
                ctx.manifest.add_topic(t.topic, t.num_partitions, "CreateTopics (AdminClient)",
                                       config=t.config)
            time.sleep(0.3)
            a.op("describe_topics", "DescribeTopicPartitions", ["admin-orders"],
                 lambda: _futures(ck.describe_topics(TopicCollection(["admin-orders"])),
                                  lambda d: {"partitions": len(d.partitions)}))
            a.op("describe_configs", "DescribeConfigs", {"topic": "admin-compacted"},
                 lambda: _futures(ck.describe_configs(
                     [ConfigResource(ResourceType.TOPIC, "admin-compacted")]), _configs))
            alter = ConfigResource(ResourceType.TOPIC, "admin-orders", incremental_configs=[
                ConfigEntry("retention.ms", "3600000",
                            incremental_operation=AlterConfigOpType.SET)])
            a.op("incremental_alter_configs", "IncrementalAlterConfigs",
                 {"topic": "admin-orders", "set": {"retention.ms": "3600000"}},
                 lambda: _futures(ck.incremental_alter_configs([alter]),
                                  lambda r: "ok"))
            a.op("describe_configs", "DescribeConfigs", {"topic": "admin-orders"},
                 lambda: _futures(ck.describe_configs(
                     [ConfigResource(ResourceType.TOPIC, "admin-orders")]), _configs))

            kp = KafkaAdminClient(bootstrap_servers=bs, client_id="tansu-kp-admin")
            ctx.manifest.add_client(client_id="tansu-kp-admin", library="kafka-python",
                                    library_version=kafka.__version__,
                                    role="admin (KafkaAdminClient)", config={})
            k = Admin(ctx, "tansu-kp-admin")
            k.op("create_topics", "CreateTopics", [{"name": "admin-kp", "partitions": 2}],
                 lambda: str(kp.create_topics([KpNewTopic("admin-kp", 2, 1)])))
            ctx.manifest.add_topic("admin-kp", 2, "CreateTopics (KafkaAdminClient)")
            k.op("describe_configs", "DescribeConfigs", {"topic": "admin-kp"},
                 lambda: str(kp.describe_configs(
                     [KpConfigResource(KpConfigResourceType.TOPIC, "admin-kp")])))
            k.op("list_topics", "Metadata", {}, lambda: sorted(kp.list_topics()))

            prod = RdkProducer(ctx, bs, "tansu-producer", acks=-1, **{"linger.ms": 5})
            for n in range(6):
                prod.produce("admin-orders", None if n == 4 else f"adm-{n}".encode(),
                             order_json(900 + n), headers=[("via", b"tansu")] if n % 2 else None,
                             partition=n % 3)
            prod.flush()
            prod.close()
            cons = RdkConsumer(ctx, bs, "tansu-consumer", **{
                "group.id": GROUP, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 3000,
                "max.poll.interval.ms": 4000, "heartbeat.interval.ms": 1000,
                "partition.assignment.strategy": "range"})
            cons.consumer.subscribe(["admin-orders"])
            cons.consume(6, timeout=40)
            committed = cons.consumer.commit(asynchronous=False)
            cons.close()
            ctx.manifest.add_group(GROUP, ["tansu-consumer"],
                                   [{"topic": tp.topic, "partition": tp.partition,
                                     "offset": tp.offset} for tp in committed or []])
            ctx.manifest.note("tansu-consumer uses max.poll.interval.ms=4000: Tansu answers "
                              "the second JoinGroup (after MEMBER_ID_REQUIRED) only when the "
                              "rebalance timeout (= max.poll.interval.ms) expires")

            a.op("list_consumer_groups", "ListGroups", {},
                 lambda: sorted(g.group_id for g in
                                ck.list_consumer_groups().result(30).valid))
            k.op("list_groups", "ListGroups", {}, lambda: str(kp.list_groups()))
            a.op("describe_consumer_groups", "DescribeGroups", [GROUP],
                 lambda: _futures(ck.describe_consumer_groups([GROUP]),
                                  lambda d: {"state": str(d.state),
                                             "members": len(d.members)}))
            a.op("list_consumer_group_offsets", "OffsetFetch", {"group": GROUP},
                 lambda: _futures(ck.list_consumer_group_offsets(
                     [ConsumerGroupTopicPartitions(GROUP)]),
                     lambda r: sorted((tp.topic, tp.partition, tp.offset)
                                      for tp in r.topic_partitions)))
            specs = {CkTopicPartition("admin-orders", p): OffsetSpec.latest() for p in (0, 1, 2)}
            a.op("list_offsets", "ListOffsets", {"admin-orders": "latest"},
                 lambda: _futures(ck.list_offsets(specs), lambda r: r.offset))
            a.op("create_partitions", "CreatePartitions", {"admin-orders": 4},
                 lambda: _futures(ck.create_partitions([NewPartitions("admin-orders", 4)])),
                 sent=False)
            k.op("create_partitions", "CreatePartitions", {"admin-kp": 3},
                 lambda: str(kp.create_partitions({"admin-kp": KpNewPartitions(3)})),
                 sent=False)
            a.op("delete_consumer_groups", "DeleteGroups", [GROUP],
                 lambda: _futures(ck.delete_consumer_groups([GROUP]), lambda r: "ok"))
            a.op("delete_topics", "DeleteTopics", ["admin-scratch"],
                 lambda: _futures(ck.delete_topics(["admin-scratch"], operation_timeout=10),
                                  lambda r: "ok"))
            k.op("delete_topics", "DeleteTopics", ["admin-kp"],
                 lambda: str(kp.delete_topics(["admin-kp"])))
            kp.close()
            a.op("delete_records", "DeleteRecords", {"admin-orders[0]": "before offset 1"},
                 lambda: _futures(ck.delete_records([CkTopicPartition("admin-orders", 0, 1)],
                                                    operation_timeout=10),
                                  lambda r: r.low_watermark))
            del ck
            gc.collect()
        ctx.manifest.note(
            "create_partitions is refused by both clients without sending anything: Tansu "
            "0.6.0 does not list CreatePartitions (API 37) in its ApiVersions response")
        ctx.manifest.note(
            "delete_records: Tansu 0.6.0's in-memory storage panics ('not yet implemented') "
            "on DeleteRecords and drops the connection, so that request has no response")
        ctx.manifest.note(
            "list_offsets(latest) on Tansu 0.6.0 answers offset 1 for partitions that hold "
            "2 records (offsets 0 and 1) and where the group committed offset 2; recorded "
            "as the client received it")
        log.close()
        ctx.post_processors.append(attach_requests)


SCENARIOS = [
    Scenario("tansu-admin",
             "confluent-kafka AdminClient and kafka-python KafkaAdminClient admin APIs "
             "(CreateTopics, DescribeConfigs, IncrementalAlterConfigs, ListGroups, "
             "DescribeGroups, DeleteGroups, DeleteTopics, DeleteRecords, ...) plus a "
             "produce/consume round trip, against Tansu", run),
]
