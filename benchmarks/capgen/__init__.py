"""Benchmark capture generators: real Kafka software (librdkafka's mock cluster and
confluent-kafka clients) captured by tcpdump in a private network namespace.

Built on the sample-capture generator's building blocks (``tools/pcapgen``: network
namespace, fixed broker ports, tcpdump with drop checks, the mock cluster). Each
scenario module exposes ``NAME``, ``PORTS``, ``DESCRIPTION``, ``PARAMS`` and
``run(session) -> dict`` (facts about what the clients did).
"""
