"""The whole pipeline on one machine: embedded broker, simulated fabric, collectors, agents, processor.

Used by ``flowtracer demo`` and by the end-to-end tests. Every stage runs as its own
``flowtracer`` subprocess, talking to the others only through Kafka and the simulator's network
endpoints and files, exactly as on a real fabric. Everything started is stopped, in reverse
order, on ``stop()`` or when the context exits, whatever happened.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from flowtracer.demo.broker_limits import BROKER_RETENTION_S
from flowtracer.embedded.log_retention import RetentionPolicy, policies_from_plan
from flowtracer.embedded.object_store import ObjectStore
from flowtracer.embedded.object_sweeper import ObjectSweeper
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.plumbing.topic_admin import ClusterPolicy, ensure_topics, plan

log = logging.getLogger(__name__)


class PipelineError(RuntimeError):
    """A stage failed to start or died; the message names it and points at its log."""


@dataclass
class Stage:
    """One running ``flowtracer`` subprocess and its log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]
    #: The ``flowtracer`` arguments it was started with (``LocalPipeline.restart`` starts it again).
    args: Sequence[str] = ()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGINT (clean shutdown, flushes), then SIGTERM, then SIGKILL."""
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if self.proc.poll() is not None:
                break
            self.proc.send_signal(sig)
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        self.log_file.close()
        return self.proc.returncode

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class PipelineOptions:
    """What to run. Durations in seconds."""

    topology: Path
    workload: str = "ring-allreduce"
    sim_args: Sequence[str] = ()
    hop_s: float = 1.0
    partitions: int = 4
    resolvers: Sequence[str] = ("hash",)
    #: Topology the processor is given, when it should differ from the simulator's (a wrong seed).
    processor_topology: Path | None = None
    influx_url: str | None = None
    line_protocol_file: Path | None = None
    workers: int = 1
    processor_args: Sequence[str] = ()
    #: Extra ``flowtracer collect`` and ``flowtracer agent`` arguments (e.g. ``--metrics-port``).
    collector_args: Sequence[str] = ()
    agent_args: Sequence[str] = ()
    log_level: str = "info"
    #: Turn path tracing on in the agents: the ``sim`` transport at the simulator's trace responder on the
    #: model data plane, the ``kernel`` transport in each host's namespace on the kernel data plane.
    agent_tracing: bool = False
    #: Probe budget per simulated host, probes/s (the one agent process plays every host: its budget is this x hosts).
    probes_per_host_s: float = 50.0
    #: The agents' ``tracing.refresh`` in seconds (None: the agent's default); a trace holds twice this long.
    trace_refresh_s: float | None = None
    #: The agents' ``tracing.probe_form``: ``roce`` (a BTH with the flow's destination QP) or ``udp`` (plain).
    probe_form: str = "roce"
    #: Have the collector read the switches' congestion counters (``gnmi.congestion``, a ``--config`` file
    #: written into the run directory): for workloads whose simulator models congestion.
    switch_congestion: bool = False
    #: Kafka TLS/SASL settings file every stage is given (``--kafka-config``); then pass the broker that
    #: speaks them as ``LocalPipeline(broker=...)`` (its ``client_config`` creates the topics).
    kafka_config: Path | None = None
    #: Where the embedded broker keeps records: ``memory`` (Tansu's memory storage: nothing is ever freed, fine
    #: for a run of minutes) or ``objects`` (an object store, and the topics' retention applied by deleting batch
    #: objects: bounded for a run of any length; docs/operations.md, "The embedded broker's memory").
    broker_storage: str = "memory"
    #: With ``objects``: how long the inputs, outputs and internal topics keep records, s; compacted topics and
    #: changelogs keep each key's latest record, and a tombstone this long.
    broker_retention_s: float = BROKER_RETENTION_S
    #: With ``objects``: seconds between two sweeps of the store.
    sweep_interval_s: float = 10.0


def embedded_retention(partitions: int, app_ids: Sequence[str], retention_s: float) -> dict[str, RetentionPolicy]:
    """The embedded broker's retention per topic: the one topic plan with ``retention_s`` on every delete-policy
    topic, and tombstones of the compacted ones kept as long (Kafka's default day would keep a demo's for a day)."""
    ms = round(retention_s * 1000)
    topics = plan(partitions, app_ids, ClusterPolicy(retention_input_ms=ms, retention_output_ms=ms,
                                                      retention_internal_ms=ms))
    return {name: replace(p, delete_retention_ms=ms) if p.compact else p
            for name, p in policies_from_plan(topics).items()}


@dataclass
class LocalPipeline:
    """Start with ``start()`` (or ``with``); ``ready`` is the simulator's ready JSON."""

    options: PipelineOptions
    run_dir: Path
    broker: TansuBroker | None = None
    object_store: ObjectStore | None = None
    sweeper: ObjectSweeper | None = None
    stages: list[Stage] = field(default_factory=list)
    ready: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def __enter__(self) -> LocalPipeline:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None
        return self.broker.bootstrap

    def _spawn(self, name: str, args: Sequence[str], append: bool = False) -> Stage:
        log_path = self.run_dir / f"{name}.log"
        log_file = open(log_path, "ab" if append else "wb")  # noqa: SIM115 - closed by Stage.stop
        cmd = [sys.executable, "-m", "flowtracer", "--log-level", self.options.log_level, *args]
        log.info("starting %s: %s", name, " ".join(cmd))
        proc = subprocess.Popen(cmd, stdout=log_file if name != "sim" else subprocess.PIPE, stderr=log_file,
                                stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)
        stage = Stage(name, proc, log_path, log_file, tuple(args))
        self.stages.append(stage)
        return stage

    def stage(self, name: str) -> Stage:
        """The newest stage called ``name`` (KeyError if none)."""
        for s in reversed(self.stages):
            if s.name == name:
                return s
        raise KeyError(name)

    def kill_stage(self, name: str, sig: signal.Signals = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Send ``sig`` to stage ``name`` (a fault: an operator or the kernel ending it) and wait for it to
        exit; SIGKILL after ``timeout``. Returns its exit code."""
        stage = self.stage(name)
        if stage.alive():
            stage.proc.send_signal(sig)
            try:
                stage.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                stage.proc.kill()
                stage.proc.wait(5.0)
        stage.log_file.close()
        return stage.proc.returncode

    def pause_stage(self, name: str, seconds: float) -> None:
        """Stop stage ``name`` (its whole process group) for ``seconds``, then let it go on: what a machine busy with
        other work can do to a process, at its worst (a fault: nothing is killed, every socket stays open)."""
        stage = self.stage(name)
        os.killpg(stage.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.killpg(stage.proc.pid, signal.SIGCONT)

    def restart(self, name: str) -> Stage:
        """Start stage ``name`` again with the arguments it was first given (after ``kill_stage``); its log
        continues in the same file."""
        old = self.stage(name)
        if old.alive():
            raise PipelineError(f"{name} is still running; stop it first")
        self.stages.remove(old)
        return self._spawn(name, old.args, append=True)

    def start(self) -> None:
        o = self.options
        self.run_dir = self.run_dir.resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.broker is None:
                if o.broker_storage == "objects":
                    self.object_store = ObjectStore(log_dir=self.run_dir).start()
                self.broker = TansuBroker(log_dir=self.run_dir, object_store=self.object_store)
            self.broker.start()
            ensure_topics(self.bootstrap, o.partitions, client_config=self.broker.client_config)
            if self.object_store is not None:
                app_ids = [f"flowtracer-{r}" for r in o.resolvers]
                self.sweeper = ObjectSweeper(
                    self.object_store.endpoint, self.object_store.bucket, self.broker.cluster_id,
                    embedded_retention(o.partitions, app_ids, o.broker_retention_s), interval_s=o.sweep_interval_s,
                ).start()
            self._start_sim()
            sim_topology = self.ready["topology"]
            self.start_processors(o.resolvers)
            # Tansu has no idempotent producers: both producers are told so.
            collector_config = ["--config", str(self.write_collector_config())] if o.switch_congestion else []
            self._spawn("collect", ["collect", "--topology", sim_topology, "--kafka", self.bootstrap,
                                    "--no-idempotence", *collector_config, *self.kafka_config_args(),
                                    *o.collector_args])
            agent_config = ["--config", str(self.write_agent_config())] if o.agent_tracing else []
            self._spawn("agent", ["agent", *agent_config, "--source", "sim",
                                  "--sim-endpoints", str(self.run_dir / "ready.json"),
                                  "--topology", sim_topology, "--kafka", self.bootstrap, "--no-kafka-idempotence",
                                  "--interval", f"{round(o.hop_s * 1000)}ms", *self.kafka_config_args(),
                                  *o.agent_args])
            self.check()
        except BaseException:
            self.stop()
            raise

    def _start_sim(self) -> None:
        o = self.options
        stage = self._spawn("sim", ["sim", "--topology", str(o.topology), "--workload", o.workload,
                                    "--tick", f"{o.hop_s}", "--gnmi-ports", "free",
                                    "--out", str(self.run_dir / "sim"), *o.sim_args])
        assert stage.proc.stdout is not None
        line = stage.proc.stdout.readline()  # the simulator prints one JSON object when it is ready
        if not line:
            raise PipelineError(f"the simulator exited before it was ready: {stage.tail()}")
        self.ready = json.loads(line)
        (self.run_dir / "ready.json").write_text(json.dumps(self.ready))

    def write_collector_config(self) -> Path:
        """``RUN_DIR/collector.yaml``: ``gnmi.congestion`` on (docs/congestion-counters.md); the rest defaults."""
        path = self.run_dir / "collector.yaml"
        path.write_text(json.dumps({"gnmi": {"congestion": True}}) + "\n", encoding="utf-8")  # JSON is YAML
        return path

    def write_agent_config(self) -> Path:
        """``RUN_DIR/agent.yaml``: a ``tracing:`` section for the data plane the simulator runs (docs/tracing.md).

        Model: ``transport: sim`` (the agent finds the responder in the ready JSON it is given). Kernel:
        ``transport: kernel`` with ``netns`` = each host's namespace from the ready JSON, so probes leave
        from the host's own namespace with the flow's 5-tuple, as the traffic does.
        """
        hosts = self.ready.get("host_view_dirs") or {}
        tracing: dict[str, Any] = {"enabled": True,
                                   "probes_per_second": self.options.probes_per_host_s * max(1, len(hosts)),
                                   "burst": max(20, 4 * len(hosts)), "probe_form": self.options.probe_form}
        if self.options.trace_refresh_s is not None:
            tracing["refresh"] = f"{round(self.options.trace_refresh_s * 1000)}ms"
        if self.ready.get("dataplane") == "kernel":
            netns = self.ready.get("netns") or {}
            tracing |= {"transport": "kernel", "netns": {h: netns[h] for h in hosts if h in netns} or dict(netns)}
        else:
            if not self.ready.get("trace_responder"):
                raise PipelineError("tracing is on but the simulator started no trace responder")
            tracing["transport"] = "sim"
        path = self.run_dir / "agent.yaml"
        path.write_text(json.dumps({"tracing": tracing}, indent=1) + "\n", encoding="utf-8")  # JSON is YAML
        return path

    def start_processors(self, resolvers: Sequence[str], workers: int | None = None,
                         app_id: str | None = None) -> list[Stage]:
        """Start ``workers`` processor workers per resolver (each resolver its own app id by default)."""
        o = self.options
        topology = str(o.processor_topology or self.ready["topology"])
        started = []
        for resolver in resolvers:
            for i in range(workers or o.workers):
                args = ["process", "--topology", topology, "--kafka", self.bootstrap, "--tansu",
                        "--resolver", resolver, "--partitions", str(o.partitions), "--hop", str(o.hop_s),
                        "--app-id", app_id or f"flowtracer-{resolver}", *self.kafka_config_args(), *o.processor_args]
                if o.influx_url:
                    args += ["--influx-url", o.influx_url]
                if o.line_protocol_file:
                    args += ["--line-protocol-file", str(o.line_protocol_file)]
                started.append(self._spawn(f"process-{app_id or resolver}-{i}", args))
        return started

    def kafka_config_args(self) -> list[str]:
        """``--kafka-config FILE`` when the options name one."""
        return ["--kafka-config", str(self.options.kafka_config)] if self.options.kafka_config else []

    def check(self) -> None:
        """Raise PipelineError naming any stage that died."""
        for s in self.stages:
            if not s.alive() and s.proc.returncode not in (0, None):
                raise PipelineError(f"{s.name} exited with {s.proc.returncode}; see {s.log_path}:\n{s.tail()}")

    def wait(self, seconds: float) -> None:
        """Let the pipeline run, checking every second that every stage is alive."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.check()
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def stop_stages(self) -> None:
        """Stop every stage in reverse start order (the broker keeps its data for reading)."""
        for stage in reversed(self.stages):
            if stage.alive():
                stage.stop()
            elif not stage.log_file.closed:
                stage.log_file.close()

    def broker_state(self) -> dict[str, Any]:
        """Where the broker keeps records and what retention did: storage, retention (s), the broker's resident
        memory (bytes), and with the object store the sweeper's counts and the store's bytes on disk."""
        o = self.options
        rss = self.broker.resident_bytes() if self.broker is not None else None
        out: dict[str, Any] = {"storage": "objects" if self.object_store is not None else "memory",
                               "broker_resident_bytes": rss}
        if self.sweeper is not None and self.object_store is not None:
            st = self.sweeper.stats()
            out |= {"retention_s": o.broker_retention_s, "sweeps": st.sweeps, "objects_kept": st.objects_kept,
                    "bytes_kept": st.bytes_kept, "objects_deleted": st.objects_deleted,
                    "bytes_deleted": st.bytes_deleted, "sweep_errors": st.errors,
                    "store_bytes": self.object_store.stats()["bytes"]}
        return out

    def stop(self) -> None:
        """Stop every stage, then the broker (its sweeper first, its object store last)."""
        self.stop_stages()
        if self.sweeper is not None:
            self.sweeper.stop()
        if self.broker is not None:
            self.broker.stop()
        if self.object_store is not None:
            self.object_store.stop()
