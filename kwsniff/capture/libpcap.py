"""A thin ctypes binding over the system libpcap (no compiled extension).

Contract:

* :func:`load` returns the process-wide :class:`ctypes.CDLL` with argument and result
  types declared for the handful of functions live capture uses, or raises
  :class:`kwsniff.errors.CaptureError` saying how to install libpcap when it cannot be
  loaded. ``KWSNIFF_LIBPCAP`` (a file name or path) overrides the library searched for.
* :func:`findalldevs` lists the capture devices libpcap knows (name, description,
  loopback/up/running flags), including the ``any`` pseudo-device on Linux.
* Nothing else here knows about Kafka or packets tuples; :mod:`kwsniff.capture.live`
  builds the packet source on top.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

from kwsniff.errors import CaptureError

INSTALL_HINT = ("install it with: apt-get install libpcap0.8 (Debian/Ubuntu), "
                "dnf install libpcap (Fedora/RHEL) or apk add libpcap (Alpine)")

# libpcap constants (pcap/pcap.h)
PCAP_ERRBUF_SIZE = 256
PCAP_NETMASK_UNKNOWN = 0xFFFFFFFF
PCAP_ERROR = -1
PCAP_ERROR_BREAK = -2
PCAP_ERROR_NOT_ACTIVATED = -3
PCAP_ERROR_ACTIVATED = -4
PCAP_ERROR_NO_SUCH_DEVICE = -5
PCAP_ERROR_RFMON_NOTSUP = -6
PCAP_ERROR_NOT_RFMON = -7
PCAP_ERROR_PERM_DENIED = -8
PCAP_ERROR_IFACE_NOT_UP = -9
PCAP_ERROR_CANTSET_TSTAMP_TYPE = -10
PCAP_ERROR_PROMISC_PERM_DENIED = -11
PCAP_ERROR_TSTAMP_PRECISION_NOTSUP = -12
PCAP_IF_LOOPBACK = 0x1
PCAP_IF_UP = 0x2
PCAP_IF_RUNNING = 0x4

# Names tried in order; the Debian package libpcap0.8 ships libpcap.so.0.8 and
# upstream builds ship libpcap.so.1 (the same ABI).
_CANDIDATES = ("libpcap.so.1", "libpcap.so.0.8", "libpcap.so", "libpcap.dylib")


class Stat(ctypes.Structure):
    _fields_ = [("ps_recv", ctypes.c_uint), ("ps_drop", ctypes.c_uint),
                ("ps_ifdrop", ctypes.c_uint)]


class BpfProgram(ctypes.Structure):
    _fields_ = [("bf_len", ctypes.c_uint), ("bf_insns", ctypes.c_void_p)]


class _PcapIf(ctypes.Structure):
    pass


_PcapIf._fields_ = [("next", ctypes.POINTER(_PcapIf)), ("name", ctypes.c_char_p),
                    ("description", ctypes.c_char_p), ("addresses", ctypes.c_void_p),
                    ("flags", ctypes.c_uint32)]

_lib: ctypes.CDLL | None = None
_libc: ctypes.CDLL | None = None


def _declare(lib: ctypes.CDLL) -> None:
    p = ctypes.c_void_p
    cp = ctypes.c_char_p
    i = ctypes.c_int
    sigs: dict[str, tuple[object, list[object]]] = {
        "pcap_create": (p, [cp, cp]),
        "pcap_set_snaplen": (i, [p, i]),
        "pcap_set_promisc": (i, [p, i]),
        "pcap_set_timeout": (i, [p, i]),
        "pcap_set_immediate_mode": (i, [p, i]),
        "pcap_set_buffer_size": (i, [p, i]),
        "pcap_activate": (i, [p]),
        "pcap_geterr": (cp, [p]),
        "pcap_statustostr": (cp, [i]),
        "pcap_datalink": (i, [p]),
        "pcap_set_datalink": (i, [p, i]),
        "pcap_snapshot": (i, [p]),
        "pcap_compile": (i, [p, ctypes.POINTER(BpfProgram), cp, i, ctypes.c_uint32]),
        "pcap_setfilter": (i, [p, ctypes.POINTER(BpfProgram)]),
        "pcap_freecode": (None, [ctypes.POINTER(BpfProgram)]),
        "pcap_setnonblock": (i, [p, i, cp]),
        "pcap_get_selectable_fd": (i, [p]),
        # the callback is passed as a plain address: pcap_dump itself (see BatchReader)
        "pcap_dispatch": (i, [p, i, p, p]),
        "pcap_dump_fopen": (p, [p, p]),
        "pcap_dump_close": (None, [p]),
        "pcap_stats": (i, [p, ctypes.POINTER(Stat)]),
        "pcap_breakloop": (None, [p]),
        "pcap_close": (None, [p]),
        "pcap_findalldevs": (i, [ctypes.POINTER(ctypes.POINTER(_PcapIf)), cp]),
        "pcap_freealldevs": (None, [ctypes.POINTER(_PcapIf)]),
        "pcap_lib_version": (cp, []),
    }
    for name, (restype, argtypes) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError as err:
            raise CaptureError(f"the libpcap found ({lib._name}) lacks {name}; it is too old "
                               f"(need libpcap >= 1.5): {INSTALL_HINT}") from err
        fn.restype = restype
        fn.argtypes = argtypes


def load() -> ctypes.CDLL:
    """Load libpcap once per process; raise CaptureError with an install hint if absent."""
    global _lib
    if _lib is not None:
        return _lib
    override = os.environ.get("KWSNIFF_LIBPCAP")
    names: list[str] = [override] if override else list(_CANDIDATES)
    if not override:
        found = ctypes.util.find_library("pcap")
        if found and found not in names:
            names.append(found)
    reasons: list[str] = []
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError as err:
            reasons.append(str(err).split(":")[-1].strip() or name)
            continue
        _declare(lib)
        _lib = lib
        return lib
    what = f"KWSNIFF_LIBPCAP={override}" if override else "libpcap"
    detail = f" ({reasons[0]})" if override and reasons else ""
    raise CaptureError(f"live capture needs libpcap, and {what} cannot be loaded{detail}; "
                       f"{INSTALL_HINT}")


def _load_libc() -> ctypes.CDLL:
    global _libc
    if _libc is not None:
        return _libc
    try:
        libc = ctypes.CDLL(None)
        libc.fmemopen  # noqa: B018 - probe: fmemopen is POSIX.1-2008
    except (OSError, AttributeError):
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name)
            libc.fmemopen  # noqa: B018
        except (OSError, AttributeError, TypeError) as err:
            raise CaptureError("live capture needs a C library with fmemopen "
                               "(POSIX.1-2008); this system's has none") from err
    p = ctypes.c_void_p
    libc.fmemopen.restype = p
    libc.fmemopen.argtypes = [p, ctypes.c_size_t, ctypes.c_char_p]
    for name in ("fflush", "ferror", "fclose"):
        getattr(libc, name).restype = ctypes.c_int
        getattr(libc, name).argtypes = [p]
    libc.clearerr.restype = None
    libc.clearerr.argtypes = [p]
    libc.ftell.restype = ctypes.c_long
    libc.ftell.argtypes = [p]
    libc.fseek.restype = ctypes.c_int
    libc.fseek.argtypes = [p, ctypes.c_long, ctypes.c_int]
    _libc = libc
    return libc


class BatchReader:
    """Reads packets in batches entirely inside libpcap: no Python call per packet.

    ``pcap_dispatch`` is given libpcap's own ``pcap_dump`` as its callback (its man page
    says its arguments suit pcap_dispatch), writing pcap records (16-byte header: ts_sec,
    ts_usec, caplen, len; then the bytes) into a fixed in-memory stream (``fmemopen``).
    ``count`` packets per call are chosen so that a batch always fits in the buffer.
    """

    def __init__(self, handle: int, snaplen: int, buffer_bytes: int = 16 << 20,
                 max_count: int = 4096) -> None:
        self._lib = load()
        self._libc = _load_libc()
        self._handle = handle
        self._buf = ctypes.create_string_buffer(buffer_bytes)
        self._addr = ctypes.addressof(self._buf)
        self.count = max(1, min(max_count, buffer_bytes // (max(snaplen, 1) + 16)))
        self._fp = self._libc.fmemopen(self._buf, buffer_bytes, b"w")
        if not self._fp:
            raise CaptureError(f"cannot allocate a {buffer_bytes >> 20} MiB capture batch buffer")
        self._dumper = self._lib.pcap_dump_fopen(handle, self._fp)
        if not self._dumper:
            self._libc.fclose(self._fp)
            raise CaptureError(f"cannot set up batch reading: {text(self._lib.pcap_geterr(handle))}")
        self._callback = ctypes.cast(self._lib.pcap_dump, ctypes.c_void_p).value
        self._libc.fflush(self._fp)
        self._libc.fseek(self._fp, 0, 0)  # drop the savefile header written at open

    def read(self) -> tuple[int, bytes, bool]:
        """Dispatch one batch: ``(status, records, overflowed)``.

        ``status`` is pcap_dispatch's result (packets handled, 0 none ready, -1 error,
        -2 break); ``records`` are the pcap records written; ``overflowed`` is True if
        the stream reported a write error (records may then be cut short).
        """
        libc = self._libc
        fp = self._fp
        n = self._lib.pcap_dispatch(self._handle, self.count, self._callback, self._dumper)
        if n <= 0:
            return n, b"", False
        libc.fflush(fp)
        used = libc.ftell(fp)
        overflowed = bool(libc.ferror(fp))
        if overflowed:
            libc.clearerr(fp)
        libc.fseek(fp, 0, 0)
        return n, ctypes.string_at(self._addr, used), overflowed

    def close(self) -> None:
        """Close the dump stream (pcap_dump_close also closes the FILE)."""
        if self._dumper:
            self._lib.pcap_dump_close(self._dumper)
            self._dumper = None
            self._fp = None


def version() -> str:
    """libpcap's version string, e.g. ``libpcap version 1.10.3 (with TPACKET_V3)``."""
    return load().pcap_lib_version().decode("utf-8", "replace")


def text(raw: bytes | None) -> str:
    """Decode a C string returned by libpcap (never raises)."""
    return raw.decode("utf-8", "replace") if raw else ""


@dataclass(frozen=True, slots=True)
class Device:
    """One capture device as libpcap lists it."""

    name: str
    description: str
    loopback: bool
    up: bool
    running: bool


def findalldevs() -> list[Device]:
    """All devices libpcap can open (may be incomplete without capture privileges)."""
    lib = load()
    head = ctypes.POINTER(_PcapIf)()
    errbuf = ctypes.create_string_buffer(PCAP_ERRBUF_SIZE)
    if lib.pcap_findalldevs(ctypes.byref(head), errbuf) != 0:
        raise CaptureError(f"cannot list capture interfaces: {text(errbuf.value)}")
    out: list[Device] = []
    try:
        node = head
        while node:
            dev = node.contents
            flags = int(dev.flags)
            out.append(Device(text(dev.name), text(dev.description),
                              bool(flags & PCAP_IF_LOOPBACK), bool(flags & PCAP_IF_UP),
                              bool(flags & PCAP_IF_RUNNING)))
            node = dev.next
    finally:
        if head:
            lib.pcap_freealldevs(head)
    return out
