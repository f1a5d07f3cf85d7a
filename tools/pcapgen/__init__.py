"""Generator of kwsniff's sample captures from real Kafka software.

Entry point: ``tools/make_pcaps.py``. Each scenario (``scenarios/``) starts a real
broker (librdkafka's mock cluster or Tansu), captures the loopback traffic of real
clients with tcpdump inside a private network namespace, and writes
``pcaps/<name>.pcap`` plus ``pcaps/<name>.json``: a manifest of what the clients
really did, recorded on the client side (see ``pcaps/README.md``).
"""
