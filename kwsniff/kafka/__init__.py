"""Kafka: framing, headers, schemas, records, compression, conversations (sans-IO)."""
