"""SASL against Tansu with authentication required: librdkafka and kafka-python clients
try SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN and are refused.

Tansu 0.6.0 keeps SCRAM credentials in its storage, and a broker that requires
authentication refuses the unauthenticated AlterUserScramCredentials that ``tansu user
create`` sends; with the in-memory storage no user can exist, so every SCRAM exchange
ends after the client-first message (``e=unknown-user``) and PLAIN at the handshake
(not enabled). What crosses the wire is what a user debugging a refused client sees:
ApiVersions, SaslHandshake (v1 with SaslAuthenticate, v0 with the token sent bare),
the client-first message, the broker's refusal.
"""

from __future__ import annotations

import time
from typing import Any

import kafka
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer

from ..brokers import TansuBroker
from ..clients import CK_VERSION, LIBRDKAFKA_VERSION
from ..context import ScenarioContext, ScenarioFailed
from . import Scenario

TANSU_PORT = 19993
PASSWORD = "never-on-the-wire-7f3a"       # SCRAM does not send it; PLAIN stops earlier

#: (client id, mechanism, user) of the librdkafka clients
RDK_ATTEMPTS = (("rdk-scram512", "SCRAM-SHA-512", "alice"),
                ("rdk-scram256", "SCRAM-SHA-256", "bob"),
                ("rdk-plain", "PLAIN", "carol"))
#: (client id, mechanism, user, forced api_version or None) of the kafka-python clients
KP_ATTEMPTS = (("kp-scram512", "SCRAM-SHA-512", "dave", None),
               ("kp-scram256-v0", "SCRAM-SHA-256", "erin", (0, 10, 1)))


def _rdkafka(ctx: ScenarioContext, bs: str, client_id: str, mechanism: str,
             user: str) -> None:
    errors: list[KafkaError] = []
    conf: dict[str, Any] = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                            "sasl.username": user, "sasl.password": PASSWORD,
                            # one attempt: no reconnection before the client is closed
                            "reconnect.backoff.ms": 30000, "reconnect.backoff.max.ms": 30000,
                            "message.timeout.ms": 30000}
    producer = Producer(ctx.rdkafka_conf(bs, client_id, **conf, error_cb=errors.append))
    ctx.manifest.add_client(client_id=client_id, library="confluent-kafka",
                            library_version=CK_VERSION, librdkafka_version=LIBRDKAFKA_VERSION,
                            role="producer (refused)",
                            config={k: v for k, v in conf.items() if k != "sasl.password"})
    producer.produce("sasl-orders", b"never delivered")
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    if not errors:
        raise ScenarioFailed(f"{client_id}: no error from a broker that requires SASL")
    end = time.monotonic() + 0.5        # the errors that follow the first one
    while time.monotonic() < end:
        producer.poll(0.1)
    err = next((e for e in errors if "SASL" in e.str()), errors[0])
    producer.purge()
    producer.flush(5)
    del producer
    ctx.manifest.authentication(client_id=client_id, mechanism=mechanism, username=user,
                                outcome=f"{err.name()}: {err.str()}",
                                handshake="SaslHandshake v1 + SaslAuthenticate")


def _kafka_python(ctx: ScenarioContext, bs: str, client_id: str, mechanism: str, user: str,
                  api_version: tuple[int, ...] | None) -> None:
    conf: dict[str, Any] = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                            "sasl_plain_username": user, "reconnect_backoff_ms": 30000,
                            "reconnect_backoff_max_ms": 30000}
    if api_version is not None:
        conf["api_version"] = api_version
    ctx.manifest.add_client(client_id=client_id, library="kafka-python",
                            library_version=kafka.__version__, role="producer (refused)",
                            api_version=".".join(map(str, api_version)) if api_version else None,
                            config=dict(conf))
    producer = None
    try:
        # (with a forced api_version the constructor does not connect: asking for a
        # topic's partitions does)
        producer = KafkaProducer(bootstrap_servers=bs, client_id=client_id,
                                 sasl_plain_password=PASSWORD, max_block_ms=6000, **conf)
        producer.partitions_for("sasl-orders")
    except Exception as exc:            # the refusal is what this client is here for
        outcome = f"{type(exc).__name__}: {exc}"
    else:
        raise ScenarioFailed(f"{client_id}: connected to a broker that requires SASL")
    finally:
        if producer is not None:
            producer.close(timeout=5)
    ctx.manifest.authentication(
        client_id=client_id, mechanism=mechanism, username=user, outcome=outcome[:300],
        handshake=("SaslHandshake v0, token sent bare" if api_version and api_version < (1,)
                   else "SaslHandshake v1 + SaslAuthenticate"))


def run(ctx: ScenarioContext) -> None:
    log = open(ctx.work_dir / "tansu.log", "wb")
    with TansuBroker(TANSU_PORT, log, authentication=True) as tansu:
        bs = tansu.bootstrap_servers
        ctx.node_ports["1"] = TANSU_PORT
        ctx.manifest.add_broker(software=tansu.software, version=tansu.version, node_id=1,
                                host="127.0.0.1", port=TANSU_PORT)
        ctx.manifest.note("Tansu runs in memory with --authentication and no SCRAM user "
                          "(see the scenario module): every attempt is refused")
        with ctx.capture([TANSU_PORT]):
            for client_id, mechanism, user in RDK_ATTEMPTS:
                _rdkafka(ctx, bs, client_id, mechanism, user)
            for client_id, mechanism, user, api_version in KP_ATTEMPTS:
                _kafka_python(ctx, bs, client_id, mechanism, user, api_version)
        log.close()
        ctx.manifest.note(f"every client was given the password {PASSWORD!r}; SCRAM never "
                          "sends it and the PLAIN client is refused at the handshake, so it "
                          "is not in the capture")


SCENARIOS = [
    Scenario("tansu-sasl",
             "SASL refused: librdkafka (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) and kafka-python "
             "(SCRAM-SHA-512 with SaslAuthenticate, SCRAM-SHA-256 with a v0 handshake and a "
             "bare token) against Tansu requiring authentication", run),
]
