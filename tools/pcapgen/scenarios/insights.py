"""Scenarios for the cross-exchange insights (end-to-end latency, lag, rebalances, producer
health), with the clients' own timelines in the manifest's ``insights`` object.

* ``insights-groups``: one producer writes timestamped messages while two consumer groups
  read them: ``insights-fast`` (a member joins mid-way and the first one leaves: two
  rebalances) and ``insights-slow`` (one member that sleeps per message: it lags).
* ``insights-idempotent-retry``: an idempotent producer whose broker delays its answers,
  then closes every connection with Produce requests in flight: the client sends the
  same batches (producer id, epoch, sequence) again.
* ``insights-session-timeout``: a group member in another process is killed (SIGKILL:
  no LeaveGroup); the group rebalances after its session timeout.

What the clients log (wall-clock ``time.time()``, the clock tcpdump's timestamps come
from), under ``doc["insights"]``:

* ``produced``: per message the call time (also sent as the ``produced-at`` header) and
  the delivery report's time, partition and offset;
* ``consumed``: per message and group, the time ``poll`` returned it;
* ``commits``: per synchronous commit, the time it returned and the offsets, plus for the
  slow group the high watermark librdkafka cached from its last Fetch response;
* ``rebalances``: the assign/revoke callbacks (time, member, partitions);
* ``responses``: every response the clients' librdkafka logged receiving
  (``debug=protocol`` "Received XResponse" lines: client, api, correlation id, time in
  milliseconds).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ..brokers import MockCluster
from ..clients import CK_VERSION, LIBRDKAFKA_VERSION, RdkConsumer, RdkProducer
from ..context import ScenarioContext, ScenarioFailed
from ..resplog import client_responses
from . import Scenario
from .rdkafka import register_mock

GROUPS_PORT = 20292
GROUPS_TOPIC = "clicks"
FAST_GROUP = "insights-fast"
SLOW_GROUP = "insights-slow"
MESSAGES = 60
INTERVAL = 0.15
SLOW_LIMIT = 12
SLOW_SLEEP = 0.5

RETRY_PORT = 20392
RETRY_TOPIC = "payments"

TIMEOUT_PORT = 20492
TIMEOUT_TOPIC = "beats"
TIMEOUT_GROUP = "insights-timeout"
SESSION_TIMEOUT_MS = 3000

# The member that dies: a separate process (SIGKILLed: no LeaveGroup, no close).
_VICTIM = r"""
import sys, time
from confluent_kafka import Consumer
bootstrap, group, topic = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "client.id": "victim", "group.id": group,
              "debug": "protocol", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "heartbeat.interval.ms": 300,
              "session.timeout.ms": %d, "partition.assignment.strategy": "range"})
def assigned(consumer, tps):
    print("assigned %%.6f %%s %%s" %% (time.time(), consumer.memberid(),
          ",".join(str(tp.partition) for tp in tps)), flush=True)
c.subscribe([topic], on_assign=assigned)
while True:
    c.poll(0.05)
""" % SESSION_TIMEOUT_MS

class Timeline:
    """Thread-safe lists of client events, written to ``doc["insights"]`` at the end."""

    def __init__(self, ctx: ScenarioContext) -> None:
        self.lock = threading.Lock()
        self.data: dict[str, list[dict[str, Any]]] = {
            "produced": [], "consumed": [], "commits": [], "rebalances": []}
        self.errors: list[str] = []

        def post(doc: dict[str, Any]) -> None:
            text = ctx.client_log_path.read_text(errors="replace") \
                if ctx.client_log_path.exists() else ""
            doc["insights"] = dict(self.data, responses=client_responses(text))
        ctx.post_processors.append(post)

    def add(self, kind: str, **entry: Any) -> dict[str, Any]:
        with self.lock:
            self.data[kind].append(entry)
        return entry


def _tp_list(tps: list[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition, "offset": tp.offset}
            for tp in tps]


class GroupMember(threading.Thread):
    """A consumer-group member polling in its own thread until told to stop (or until it
    consumed ``limit`` messages); commits every message synchronously; with ``sleep``
    it works that long on each message (the slow group)."""

    def __init__(self, ctx: ScenarioContext, tl: Timeline, bootstrap: str, group: str,
                 client_id: str, *, sleep: float = 0.0, limit: int | None = None,
                 topic: str = GROUPS_TOPIC, session_timeout_ms: int = 6000) -> None:
        super().__init__(name=client_id, daemon=True)
        self.tl, self.group, self.client_id = tl, group, client_id
        self.sleep, self.limit, self.topic = sleep, limit, topic
        self.stop_flag = threading.Event()
        self.rdk = RdkConsumer(ctx, bootstrap, client_id, **{
            "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "heartbeat.interval.ms": 300,
            "session.timeout.ms": session_timeout_ms, "partition.assignment.strategy": "range",
            "fetch.wait.max.ms": 100})
        self.count = 0

    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self.tl.add("rebalances", ts=time.time(), group=self.group, client_id=self.client_id,
                    event="assign", member_id=consumer.memberid(),
                    partitions=[tp.partition for tp in tps])

    def _on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self.tl.add("rebalances", ts=time.time(), group=self.group, client_id=self.client_id,
                    event="revoke", member_id=consumer.memberid(),
                    partitions=[tp.partition for tp in tps])

    def run(self) -> None:
        c = self.rdk.consumer
        try:
            c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self.stop_flag.is_set():
                if self.limit is not None and self.count >= self.limit:
                    time.sleep(0.05)
                    continue
                msg = c.poll(0.05)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.tl.errors.append(f"{self.client_id}: {msg.error()}")
                    continue
                now = time.time()
                self.rdk._record(msg)
                headers = dict(msg.headers() or [])
                self.tl.add("consumed", ts=now, group=self.group, client_id=self.client_id,
                            topic=msg.topic(), partition=msg.partition(),
                            offset=msg.offset(),
                            produced_at=float(headers.get("produced-at", b"0")))
                self.count += 1
                if self.sleep:
                    time.sleep(self.sleep)
                tp = TopicPartition(msg.topic(), msg.partition())
                _low, high = c.get_watermark_offsets(tp, cached=True)
                try:
                    committed = c.commit(message=msg, asynchronous=False)
                    error = None
                except KafkaException as exc:    # e.g. REBALANCE_IN_PROGRESS
                    committed = [TopicPartition(msg.topic(), msg.partition(),
                                                msg.offset() + 1)]
                    error = exc.args[0].name()
                self.tl.add("commits", ts=time.time(), group=self.group,
                            client_id=self.client_id, offsets=_tp_list(committed or []),
                            cached_high_watermark=high, error=error)
        except Exception as exc:  # noqa: BLE001 - reported as a scenario failure
            self.tl.errors.append(f"{self.client_id}: {exc!r}")

    def finish(self) -> None:
        self.stop_flag.set()
        self.join(30)
        self.rdk.close()


def groups(ctx: ScenarioContext) -> None:
    with MockCluster([GROUPS_PORT]) as mock:
        register_mock(ctx, mock)
        mock.create_topic(GROUPS_TOPIC, 2)
        mock.set_group_initial_rebalance_delay(100)
        ctx.manifest.add_topic(GROUPS_TOPIC, 2, "mock API (rd_kafka_mock_topic_create)")
        bs = mock.bootstrap_servers
        tl = Timeline(ctx)
        with ctx.capture(mock.ports):
            fast1 = GroupMember(ctx, tl, bs, FAST_GROUP, "fast-1")
            slow = GroupMember(ctx, tl, bs, SLOW_GROUP, "slow-1", sleep=SLOW_SLEEP,
                               limit=SLOW_LIMIT)
            fast1.start()
            slow.start()
            time.sleep(0.8)      # both groups formed before the first message
            prod = RdkProducer(ctx, bs, "clicks-producer", acks=-1, **{"linger.ms": 0})
            producing = threading.Thread(target=_produce_clicks, args=(prod, tl), daemon=True)
            producing.start()
            time.sleep(1.0)
            fast2 = GroupMember(ctx, tl, bs, FAST_GROUP, "fast-2")
            fast2.start()            # joins: first rebalance
            _wait_assigned(tl, "fast-2", 1)
            time.sleep(1.0)
            fast1.finish()           # leaves (LeaveGroup): second rebalance
            _wait_assigned(tl, "fast-2", 2)
            producing.join(60)
            prod.flush()
            time.sleep(1.5)      # the fast group catches up
            fast2.finish()
            slow.finish()
            prod.close()
        if tl.errors:
            raise ScenarioFailed("; ".join(tl.errors))
        consumed_fast = {(c["partition"], c["offset"]) for c in tl.data["consumed"]
                         if c["group"] == FAST_GROUP}
        if len(consumed_fast) != MESSAGES:
            raise ScenarioFailed(f"fast group consumed {len(consumed_fast)} distinct "
                                 f"messages of {MESSAGES}")
        for g, members in ((FAST_GROUP, ["fast-1", "fast-2"]), (SLOW_GROUP, ["slow-1"])):
            ctx.manifest.add_group(g, members, [], coordinator_node=1,
                                   protocol_type="consumer", assignment_strategy="range")
        ctx.manifest.note(f"{MESSAGES} messages, one every {INTERVAL * 1000:.0f} ms "
                          "alternating partitions 0/1, each with a produced-at header; "
                          "fast-2 joins insights-fast 1 s after the first, fast-1 leaves "
                          "1 s after fast-2 got its first assignment; slow-1 sleeps "
                          f"{SLOW_SLEEP * 1000:.0f} ms per message and stops after "
                          f"{SLOW_LIMIT}; every member commits each message synchronously")


def session_timeout(ctx: ScenarioContext) -> None:
    import signal
    import subprocess
    import sys

    with MockCluster([TIMEOUT_PORT]) as mock:
        register_mock(ctx, mock)
        mock.create_topic(TIMEOUT_TOPIC, 2)
        mock.set_group_initial_rebalance_delay(100)
        ctx.manifest.add_topic(TIMEOUT_TOPIC, 2, "mock API (rd_kafka_mock_topic_create)")
        bs = mock.bootstrap_servers
        tl = Timeline(ctx)
        victim_log = ctx.work_dir / "victim-stderr.log"
        ctx.manifest.add_client(client_id="victim", library="confluent-kafka",
                                library_version=CK_VERSION,
                                librdkafka_version=LIBRDKAFKA_VERSION, role="consumer",
                                config={"group.id": TIMEOUT_GROUP,
                                        "session.timeout.ms": SESSION_TIMEOUT_MS,
                                        "heartbeat.interval.ms": 300},
                                process="separate, killed with SIGKILL")
        with ctx.capture(mock.ports):
            survivor = GroupMember(ctx, tl, bs, TIMEOUT_GROUP, "survivor",
                                   topic=TIMEOUT_TOPIC,
                                   session_timeout_ms=SESSION_TIMEOUT_MS)
            survivor.start()
            _wait_assigned(tl, "survivor", 1)
            with open(victim_log, "wb") as err:
                victim = subprocess.Popen(
                    [sys.executable, "-c", _VICTIM, bs, TIMEOUT_GROUP, TIMEOUT_TOPIC],
                    stdout=subprocess.PIPE, stderr=err, text=True)
            line = victim.stdout.readline() if victim.stdout else ""
            if not line.startswith("assigned "):
                victim.kill()
                raise ScenarioFailed(f"victim: no assignment ({line!r})")
            _, ts, member, parts = line.split()
            tl.add("rebalances", ts=float(ts), group=TIMEOUT_GROUP, client_id="victim",
                   event="assign", member_id=member,
                   partitions=[int(p) for p in parts.split(",") if p])
            _wait_assigned(tl, "survivor", 2)
            prod = RdkProducer(ctx, bs, "beats-producer", acks=-1, **{"linger.ms": 0})
            for n in range(4):
                prod.produce(TIMEOUT_TOPIC, f"beat-{n}".encode(), b"beat", partition=n % 2)
            prod.flush()
            time.sleep(1.0)
            killed_at = time.time()
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            tl.data["killed"] = [{"client_id": "victim", "ts": killed_at,
                                  "session_timeout_ms": SESSION_TIMEOUT_MS}]
            _wait_assigned(tl, "survivor", 3, timeout=30)
            time.sleep(0.5)
            survivor.finish()
            prod.close()
        # the victim's librdkafka request log joins the others (complete lines: it is dead)
        with open(ctx.client_log_path, "ab") as log:
            log.write(victim_log.read_bytes())
        if tl.errors:
            raise ScenarioFailed("; ".join(tl.errors))
        ctx.manifest.add_group(TIMEOUT_GROUP, ["survivor", "victim"], [], coordinator_node=1,
                               protocol_type="consumer", assignment_strategy="range")
        ctx.manifest.note("survivor (in this process) and victim (another process) share "
                          f"{TIMEOUT_GROUP}; beats-producer writes 4 messages; 1 s later the "
                          "victim is killed with SIGKILL (no LeaveGroup): the coordinator "
                          f"notices after session.timeout.ms={SESSION_TIMEOUT_MS} and "
                          "survivor gets both partitions")


def _produce_clicks(prod: RdkProducer, tl: Timeline) -> None:
    for n in range(MESSAGES):
        sent_at = time.time()
        record = tl.add("produced", ts=sent_at, client_id="clicks-producer",
                        topic=GROUPS_TOPIC, partition=n % 2, key=f"click-{n}")
        prod.produce(GROUPS_TOPIC, f"click-{n}".encode(), f"click {n}".encode(),
                     headers=[("produced-at", f"{sent_at:.6f}".encode())],
                     partition=n % 2, on_delivered=_track_delivery(record))
        prod.producer.poll(0)
        time.sleep(INTERVAL)
        prod.producer.poll(0)


def _wait_assigned(tl: Timeline, client_id: str, count: int, timeout: float = 20.0) -> None:
    """Wait until ``client_id`` got its ``count``-th partition assignment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with tl.lock:
            got = sum(1 for r in tl.data["rebalances"]
                      if r["client_id"] == client_id and r["event"] == "assign")
        if got >= count:
            return
        time.sleep(0.05)
    raise ScenarioFailed(f"{client_id}: no assignment #{count} within {timeout}s")


def mark_resent(produced: list[dict[str, Any]], cut: dict[str, float],
                entries: dict[str, dict[str, Any]]) -> None:
    """Messages handed to the producer before the cut and delivered only after the
    broker came back were in flight (max.in.flight 5, linger.ms 0: sent at once) and
    were sent again on the new connection: their manifest entries get ``sends: 2``."""
    for rec in produced:
        delivered = rec.get("delivered_at")
        if rec["ts"] < cut["down_at"] and delivered is not None and delivered > cut["up_at"]:
            entries[rec["key"]]["sends"] = 2


def _drain(reader: RdkConsumer, quiet: float) -> list[Any]:
    """Every further message until none came for ``quiet`` seconds (recorded)."""
    extra = []
    deadline = time.monotonic() + quiet
    while time.monotonic() < deadline:
        msg = reader.consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        reader._record(msg)
        extra.append(msg)
        deadline = time.monotonic() + quiet
    return extra


def _track_delivery(record: dict[str, Any]) -> Any:
    """A delivery callback completing the timeline entry ``record``."""
    def delivered(err: KafkaError | None, msg: Any) -> None:
        record["delivered_at"] = time.time()
        record["partition"] = msg.partition()
        record["offset"] = msg.offset() if (msg.offset() or 0) >= 0 else None
        record["error"] = err.name() if err is not None else None
    return delivered


def idempotent_retry(ctx: ScenarioContext) -> None:
    with MockCluster([RETRY_PORT]) as mock:
        register_mock(ctx, mock)
        mock.create_topic(RETRY_TOPIC, 1)
        ctx.manifest.add_topic(RETRY_TOPIC, 1, "mock API (rd_kafka_mock_topic_create)")
        bs = mock.bootstrap_servers
        tl = Timeline(ctx)
        cut: dict[str, float] = {}
        entries: dict[str, dict[str, Any]] = {}
        with ctx.capture(mock.ports):
            prod = RdkProducer(ctx, bs, "payments-producer", acks=-1, **{
                "enable.idempotence": True, "linger.ms": 0,
                "max.in.flight.requests.per.connection": 5})
            for n in range(10):
                if n == 4:
                    prod.flush()
                    mock.set_broker_rtt(1, 400)      # answers now take 400 ms...
                if n == 8:
                    time.sleep(0.15)
                    cut["down_at"] = time.time()
                    mock.set_broker_down(1)          # ...and the connection is cut
                    time.sleep(0.3)
                    mock.set_broker_rtt(1, 0)
                    mock.set_broker_up(1)
                    cut["up_at"] = time.time()
                sent_at = time.time()
                record = tl.add("produced", ts=sent_at, client_id="payments-producer",
                                topic=RETRY_TOPIC, partition=0, key=f"pay-{n}")
                entries[record["key"]] = prod.produce(RETRY_TOPIC, f"pay-{n}".encode(), f"payment {n}".encode(),
                             partition=0,
                             headers=[("produced-at", f"{sent_at:.6f}".encode())],
                             on_delivered=_track_delivery(record))
                prod.producer.poll(0)
                time.sleep(0.02)
            prod.flush(30, allow_failures=True)
            prod.close()
            reader = RdkConsumer(ctx, bs, "payments-reader", **{
                "group.id": "insights-payments-reader", "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "enable.partition.eof": True})
            reader.consumer.assign([TopicPartition(RETRY_TOPIC, 0, 0)])
            got = reader.consume(10, timeout=30)
            got += _drain(reader, 0.8)
            reader.close()
        tl.data["connection_cut"] = [cut]
        mark_resent(tl.data["produced"], cut, entries)
        tl.data["log"] = [{"offset": m.offset(), "key": (m.key() or b"").decode()}
                          for m in got]
        keys = [m.key() for m in got]
        if len(set(keys)) != len(keys):
            ctx.manifest.note("the mock broker wrote retried batches again (it does not "
                              "deduplicate idempotent sequences): the log reads "
                              + ", ".join(f"{m.offset()}:{(m.key() or b'').decode()}"
                                          for m in got))
        ctx.manifest.note("payments-producer (enable.idempotence) sends 4 messages, then the "
                          "mock broker delays its answers by 400 ms; 4 more are sent, 150 ms "
                          "later the broker closes every connection (down 300 ms, then up "
                          "with no delay) and the producer sends the unanswered batches "
                          "again; payments-reader reads the partition back")


SCENARIOS = [
    Scenario("insights-groups",
             "librdkafka producer with two consumer groups (one slow, lagging; one "
             "rebalanced by a member joining and one leaving), for latency/lag/rebalances",
             groups),
    Scenario("insights-idempotent-retry",
             "librdkafka idempotent producer whose broker connection is cut with Produce "
             "requests in flight (retries of the same sequences)",
             idempotent_retry),
    Scenario("insights-session-timeout",
             "a consumer-group member killed without LeaveGroup (SIGKILL): a rebalance "
             "after its session timeout",
             session_timeout),
]
