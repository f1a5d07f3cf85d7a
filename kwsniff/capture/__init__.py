"""Capture input: pcap, pcapng (files, gzip, stdin) and live interfaces -> raw packets."""
