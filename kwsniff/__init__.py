"""kwsniff: a Wireshark-style decoder for Apache Kafka wire traffic."""

__version__ = "0.1.0"
