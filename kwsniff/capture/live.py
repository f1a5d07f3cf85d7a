"""Live packet source: capture from a network interface through libpcap.

Contract:

* :func:`open_live` opens and activates an interface (``lo``, an Ethernet interface,
  or ``any`` for Linux cooked capture) with a kernel BPF filter and returns a
  :class:`LiveSource`. Environment problems raise :class:`kwsniff.errors.CaptureError`
  with a one-line message: no permission (what is needed), unknown interface (the
  available ones), libpcap missing (how to install it), invalid filter.
* A :class:`LiveSource` is a context manager and an iterable of the same **packet
  tuples** as file captures: ``(frame, ts, linktype, data, orig_len)`` with ``frame``
  1-based in arrival order, ``ts`` epoch seconds, ``linktype`` the LINKTYPE_* of the
  interface (1 Ethernet/loopback, 113 Linux cooked v1, 276 Linux cooked v2),
  ``data`` the captured bytes (a private copy) and ``orig_len`` the length on the wire.
* Iteration ends when :meth:`LiveSource.stop` is called (safe from a signal handler or
  another thread), when the optional ``duration`` has elapsed, or when the interface
  fails (``source.error`` then says why). Packets captured before a stop or the end of
  the duration are still delivered (the kernel buffer is drained up to that moment). :meth:`LiveSource.batches` yields lists of
  tuples and an empty list after each idle ``tick``, so a consumer can act on wall-clock
  time (time out unanswered requests, flush outputs) while no packet arrives.
* :meth:`LiveSource.stats` reports packets delivered and the kernel's counters
  (``dropped``: no room in the capture buffer; ``if_dropped``: dropped by the
  interface/driver). The buffer is a fixed-size kernel ring, so memory is bounded.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType

from kwsniff.capture import libpcap
from kwsniff.capture.linktypes import linktype_name
from kwsniff.capture.pcap import PcapWalker
from kwsniff.errors import CaptureError

PacketTuple = tuple[int, float, int, bytes, int]

DEFAULT_SNAPLEN = 262144
DEFAULT_BUFFER_MIB = 64
DEFAULT_TIMEOUT_MS = 50        # kernel block retire time: worst-case delivery delay
DEFAULT_TICK = 0.25            # idle wake-up period of batches()
STOP_DRAIN_SECONDS = 2.0       # at most this long delivering what was captured before a stop

LINKTYPE_ETHERNET = 1
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276
# DLT values that differ from their LINKTYPE value (pcap-common.c); the rest are equal.
_DLT_TO_LINKTYPE = {12: 101, 11: 100}
# pcap savefile header in host byte order, microsecond timestamps (what pcap_dump
# writes): magic, version 2.4, zone, sigfigs, snaplen, linktype
_FILE_HEADER = struct.Struct("=IHHiIII")


@dataclass(frozen=True, slots=True)
class LiveStats:
    """Counters of one live capture (the kernel's are cumulative since activation)."""

    packets: int      # packets delivered to the consumer
    received: int     # packets that passed the kernel filter (ps_recv)
    dropped: int      # dropped by the kernel: capture buffer full (ps_drop)
    if_dropped: int   # dropped by the interface or its driver (ps_ifdrop)


def build_filter(ports: Sequence[int] = (), custom: str | None = None) -> str:
    """The BPF filter for ``ports`` (TCP, either direction) or ``custom`` verbatim.

    A custom filter replaces the port filter (like tcpdump's expression); with neither
    the result is ``""`` (capture everything).
    """
    if custom is not None and custom.strip():
        return custom.strip()
    for port in ports:
        if not 0 < int(port) < 65536:
            raise CaptureError(f"invalid port {port}: expected 1-65535")
    runs: list[list[int]] = []          # consecutive ports become one portrange
    for port in sorted({int(p) for p in ports}):
        if runs and port == runs[-1][1] + 1:
            runs[-1][1] = port
        else:
            runs.append([port, port])
    return " or ".join(f"tcp port {low}" if low == high else f"tcp portrange {low}-{high}"
                       for low, high in runs)


def list_interfaces() -> list[libpcap.Device]:
    """Capture devices known to libpcap (name, description, loopback/up flags)."""
    return libpcap.findalldevs()


def describe_interfaces(devices: Sequence[libpcap.Device]) -> str:
    """``lo, eth0, any (...)`` style one-line list for error messages."""
    return ", ".join(d.name for d in devices) or "none"


def open_live(interface: str, *, ports: Sequence[int] = (), bpf_filter: str | None = None,
              snaplen: int = DEFAULT_SNAPLEN, buffer_mib: int = DEFAULT_BUFFER_MIB,
              promisc: bool = False, immediate: bool = False,
              timeout_ms: int = DEFAULT_TIMEOUT_MS, datalink: int | None = None,
              duration: float | None = None) -> LiveSource:
    """Open ``interface`` for capture; see the module docstring for the contract.

    ``immediate`` delivers every packet at once (TPACKET_V2, fixed-size ring slots);
    the default batches packets for at most ``timeout_ms`` (TPACKET_V3), which loses far
    fewer packets at high rates. ``datalink`` asks for a specific DLT; by default ``any``
    uses Linux cooked v2 (276) like tcpdump, falling back to v1 (113).
    """
    source = LiveSource(interface, filter_text=build_filter(ports, bpf_filter),
                        snaplen=snaplen, buffer_mib=buffer_mib, promisc=promisc,
                        immediate=immediate, timeout_ms=timeout_ms, datalink=datalink,
                        duration=duration)
    return source


class LiveSource:
    """An activated libpcap handle yielding packet tuples; see the module docstring."""

    def __init__(self, interface: str, *, filter_text: str = "",
                 snaplen: int = DEFAULT_SNAPLEN, buffer_mib: int = DEFAULT_BUFFER_MIB,
                 promisc: bool = False, immediate: bool = False,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS, datalink: int | None = None,
                 duration: float | None = None) -> None:
        if snaplen <= 0:
            raise CaptureError(f"invalid snap length {snaplen}: expected a positive number")
        if buffer_mib <= 0 or buffer_mib > 4095:
            raise CaptureError(f"invalid buffer size {buffer_mib} MiB: expected 1-4095")
        if duration is not None and duration < 0:
            raise CaptureError(f"invalid duration {duration}: expected seconds >= 0")
        self._lib = libpcap.load()
        self.interface = interface
        self.filter = filter_text
        self.problems: list[str] = []
        self.packets = 0
        self.error: str | None = None
        self.stop_reason: str | None = None
        self._stopping = False
        self._stop_ts: float | None = None
        self._retire_wait = max(1, timeout_ms) / 1000.0 + 0.03
        self._handle: int | None = None
        self._final_stats: LiveStats | None = None
        self._reader: libpcap.BatchReader | None = None
        self._walker: PcapWalker | None = None
        self._handle = self._activate(interface, snaplen, buffer_mib, promisc, immediate,
                                      timeout_ms, datalink)
        try:
            lib = self._lib
            dlt = lib.pcap_datalink(self._handle)
            self.linktype: int = _DLT_TO_LINKTYPE.get(dlt, dlt)
            self.linktype_name = linktype_name(self.linktype)
            self.snaplen: int = lib.pcap_snapshot(self._handle)
            if filter_text:
                self._set_filter(filter_text)
            errbuf = ctypes.create_string_buffer(libpcap.PCAP_ERRBUF_SIZE)
            if lib.pcap_setnonblock(self._handle, 1, errbuf) != 0:
                raise CaptureError(f"cannot capture on {interface}: {libpcap.text(errbuf.value)}")
            self._reader = libpcap.BatchReader(self._handle, self.snaplen)
            # the batches are pcap records: cut by the file reader's walker (one source)
            self._walker = PcapWalker(_FILE_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0,
                                                        self.snaplen, self.linktype))
            self._fd = lib.pcap_get_selectable_fd(self._handle)
            if self._fd < 0:
                raise CaptureError(f"cannot capture on {interface}: no selectable descriptor")
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)
        except BaseException:
            self._close_handle()
            raise
        self.started = time.time()
        self.deadline = None if duration is None else self.started + duration

    # -- activation ------------------------------------------------------------------

    def _activate(self, interface: str, snaplen: int, buffer_mib: int, promisc: bool,
                  immediate: bool, timeout_ms: int, datalink: int | None) -> int:
        lib = self._lib
        errbuf = ctypes.create_string_buffer(libpcap.PCAP_ERRBUF_SIZE)
        handle = lib.pcap_create(interface.encode("utf-8", "surrogateescape"), errbuf)
        if not handle:
            raise CaptureError(f"cannot capture on {interface}: {libpcap.text(errbuf.value)}")
        try:
            lib.pcap_set_snaplen(handle, snaplen)
            lib.pcap_set_promisc(handle, 1 if promisc else 0)
            lib.pcap_set_timeout(handle, max(1, timeout_ms))
            lib.pcap_set_immediate_mode(handle, 1 if immediate else 0)
            lib.pcap_set_buffer_size(handle, buffer_mib * 1024 * 1024)
            status = lib.pcap_activate(handle)
            if status < 0:
                raise self._activation_error(handle, interface, status)
            if status > 0:
                self.problems.append(f"{interface}: {libpcap.text(lib.pcap_statustostr(status))}:"
                                     f" {libpcap.text(lib.pcap_geterr(handle))}")
            if datalink is None:
                if interface == "any":
                    # like tcpdump: cooked v2 (it names the interface) where available
                    lib.pcap_set_datalink(handle, LINKTYPE_LINUX_SLL2)
            elif lib.pcap_set_datalink(handle, datalink) != 0:
                raise CaptureError(f"{interface} cannot capture with link type {datalink}: "
                                   f"{libpcap.text(lib.pcap_geterr(handle))}")
        except BaseException:
            lib.pcap_close(handle)
            raise
        return int(handle)

    def _activation_error(self, handle: int, interface: str, status: int) -> CaptureError:
        lib = self._lib
        detail = libpcap.text(lib.pcap_geterr(handle)) or libpcap.text(
            lib.pcap_statustostr(status))
        if status in (libpcap.PCAP_ERROR_PERM_DENIED, libpcap.PCAP_ERROR_PROMISC_PERM_DENIED) \
                or "Operation not permitted" in detail or "Permission denied" in detail:
            return CaptureError(
                f"no permission to capture on {interface}: run as root or grant "
                f"CAP_NET_RAW and CAP_NET_ADMIN (e.g. sudo setcap "
                f"cap_net_raw,cap_net_admin=eip {os.path.realpath(_interpreter())})")
        if status == libpcap.PCAP_ERROR_NO_SUCH_DEVICE or "No such device" in detail:
            try:
                names = describe_interfaces(libpcap.findalldevs())
            except CaptureError:
                names = "unknown (listing failed)"
            return CaptureError(f"unknown interface {interface!r}; available: {names}")
        if status == libpcap.PCAP_ERROR_IFACE_NOT_UP:
            return CaptureError(f"interface {interface} is down; bring it up first "
                                f"(ip link set {interface} up)")
        return CaptureError(f"cannot capture on {interface}: {detail}")

    def _set_filter(self, filter_text: str) -> None:
        """Compile ``filter_text`` and attach it in the kernel (CaptureError if invalid)."""
        lib = self._lib
        prog = libpcap.BpfProgram()
        if lib.pcap_compile(self._handle, ctypes.byref(prog), filter_text.encode(), 1,
                            libpcap.PCAP_NETMASK_UNKNOWN) != 0:
            raise CaptureError(f"invalid capture filter {filter_text!r}: "
                               f"{libpcap.text(lib.pcap_geterr(self._handle))}")
        try:
            if lib.pcap_setfilter(self._handle, ctypes.byref(prog)) != 0:
                raise CaptureError(f"cannot set capture filter {filter_text!r}: "
                                   f"{libpcap.text(lib.pcap_geterr(self._handle))}")
        finally:
            lib.pcap_freecode(ctypes.byref(prog))

    # -- reading -----------------------------------------------------------------------

    def _drain(self) -> list[PacketTuple]:
        """Packets already in the kernel ring (one batch), without waiting."""
        reader = self._reader
        if reader is None:
            return []
        status, records, overflowed = reader.read()
        if status < 0:
            if status == libpcap.PCAP_ERROR and self._handle is not None:
                self._fail(libpcap.text(self._lib.pcap_geterr(self._handle)))
            return []
        if overflowed:
            self.problems.append(f"batch buffer overflow after frame {self.packets}: "
                                 "packets may be cut short")
        walker = self._walker
        walker._frame = self.packets
        out: list[PacketTuple] = list(walker.walk(records, 0, len(records)))
        self.packets = walker._frame
        if walker.error is not None:     # (libpcap wrote it: cannot happen)
            self.problems.append(f"batch after frame {self.packets}: {walker.error}")
            walker.error = None
        return out

    def _fail(self, detail: str) -> None:
        self.error = f"capture on {self.interface} failed: {detail}"
        self.problems.append(self.error)
        self._stopping = True
        self.stop_reason = "error"

    def poll(self, timeout: float | None) -> list[PacketTuple]:
        """Packets available now, waiting up to ``timeout`` s (None: until one arrives).

        Returns ``[]`` on timeout or when the source is stopped.
        """
        if self._stopping or self._handle is None:
            return []
        batch = self._drain()
        if batch or self._stopping:
            return batch
        try:
            ready, _, _ = select.select([self._fd, self._wake_r], [], [], timeout)
        except InterruptedError:
            return []
        if self._wake_r in ready:
            self._clear_wakeups()
        if self._stopping:
            return []
        return self._drain()

    def batches(self, tick: float = DEFAULT_TICK) -> Iterator[list[PacketTuple]]:
        """Lists of packet tuples as they arrive; ``[]`` after each idle ``tick`` s.

        Ends when stopped, when the duration has elapsed, or on a capture error. After
        a stop or the duration, packets the kernel captured before that moment and still
        holds are delivered first (for at most ``STOP_DRAIN_SECONDS``).
        """
        while not self._stopping and self._handle is not None:
            timeout = tick
            if self.deadline is not None:
                left = self.deadline - time.time()
                if left <= 0:
                    self._finish("duration", self.deadline)
                    break
                timeout = min(tick, left)
            yield self.poll(timeout)
        if self.stop_reason is None:
            self.stop_reason = "stopped"
        if self.stop_reason != "error":
            yield from self._captured_before_stop()

    def _captured_before_stop(self) -> Iterator[list[PacketTuple]]:
        """Drain the ring up to the stop time (a block shows up once the kernel retires it)."""
        cutoff = self._stop_ts if self._stop_ts is not None else time.time()
        give_up = time.monotonic() + STOP_DRAIN_SECONDS
        waited = False
        while self._handle is not None and time.monotonic() < give_up:
            batch = self._drain()
            if batch:
                waited = False
                if batch[-1][1] > cutoff:
                    kept = [p for p in batch if p[1] <= cutoff]
                    self.packets -= len(batch) - len(kept)
                    if kept:
                        yield kept
                    return
                yield batch
                continue
            if waited or self.error:
                return
            try:
                select.select([self._fd], [], [], self._retire_wait)
            except InterruptedError:
                pass
            waited = True

    def __iter__(self) -> Iterator[PacketTuple]:
        for batch in self.batches():
            yield from batch

    # -- stopping and counters -----------------------------------------------------------

    def stop(self) -> None:
        """Ask iteration to end soon; callable from a signal handler or another thread.

        Packets captured before this call are still delivered (see :meth:`batches`).
        """
        if self.stop_reason is None:
            self.stop_reason = "stopped"
        if self._stop_ts is None:
            self._stop_ts = time.time()
        self._stopping = True
        wake = getattr(self, "_wake_w", None)
        if wake is not None:
            try:
                os.write(wake, b"!")
            except OSError:
                pass

    def _finish(self, reason: str, at: float) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        if self._stop_ts is None:
            self._stop_ts = at
        self._stopping = True

    def _clear_wakeups(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def stats(self) -> LiveStats:
        """Packets delivered and the kernel's receive/drop counters (last known after close)."""
        if self._handle is None:
            return self._final_stats or LiveStats(self.packets, 0, 0, 0)
        st = libpcap.Stat()
        if self._lib.pcap_stats(self._handle, ctypes.byref(st)) != 0:
            return self._final_stats or LiveStats(self.packets, 0, 0, 0)
        self._final_stats = LiveStats(self.packets, int(st.ps_recv), int(st.ps_drop),
                                      int(st.ps_ifdrop))
        return self._final_stats

    def close(self) -> None:
        """Record the final counters and release the handle (idempotent)."""
        if self._handle is None:
            return
        self.stats()
        self._stopping = True
        self._close_handle()
        for fd in (getattr(self, "_wake_r", None), getattr(self, "_wake_w", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._wake_r = self._wake_w = None  # type: ignore[assignment]

    def _close_handle(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._handle is not None:
            self._lib.pcap_close(self._handle)
            self._handle = None

    def __enter__(self) -> LiveSource:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _interpreter() -> str:
    import sys
    return sys.executable or "python3"
