"""TCP: link/IP/TCP header parsing and per-connection, per-direction stream reassembly."""
