"""pcap LINKTYPE_* values that kwsniff understands, and their names.

Contract: the ``linktype`` of every packet tuple is the LINKTYPE_* value from the
file (https://www.tcpdump.org/linktypes.html). ``LINKTYPE_NAMES`` names the ones the
TCP layer decodes; other values are passed through and reported as unsupported there.
"""

from __future__ import annotations

NULL = 0          # BSD loopback: 4-byte address family in the capturing host's byte order
ETHERNET = 1      # IEEE 802.3 Ethernet (DLT_EN10MB), optionally with 802.1Q/802.1ad tags
RAW_DLT12 = 12    # DLT_RAW as written by some BSDs (raw IPv4/IPv6)
RAW_DLT14 = 14    # DLT_RAW as written by OpenBSD (raw IPv4/IPv6)
RAW = 101         # raw IPv4 or IPv6, version taken from the first nibble
LOOP = 108        # OpenBSD loopback: 4-byte address family, big-endian
LINUX_SLL = 113   # Linux cooked capture v1 (16-byte header)
IPV4 = 228        # raw IPv4 only
IPV6 = 229        # raw IPv6 only
LINUX_SLL2 = 276  # Linux cooked capture v2 (20-byte header), what `tcpdump -i any` writes

LINKTYPE_NAMES: dict[int, str] = {
    NULL: "NULL (BSD loopback)",
    ETHERNET: "Ethernet",
    RAW_DLT12: "raw IP",
    RAW_DLT14: "raw IP",
    RAW: "raw IP",
    LOOP: "LOOP (OpenBSD loopback)",
    LINUX_SLL: "Linux cooked v1 (SLL)",
    IPV4: "raw IPv4",
    IPV6: "raw IPv6",
    LINUX_SLL2: "Linux cooked v2 (SLL2)",
}


def linktype_name(linktype: int) -> str:
    """A readable name for ``linktype`` (``"linktype 42"`` for unknown values)."""
    return LINKTYPE_NAMES.get(linktype, f"linktype {linktype}")
