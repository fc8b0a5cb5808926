"""``flowtracer agent``: stream RDMA flow records (QPs, RoCEv2 5-tuple, bytes) from hosts into Kafka.

Exit codes: 0 stopped normally; 1 runtime failure; 2 bad input (configuration, topology, sim
endpoints); 4 no RDMA on this host (no ``rdma`` tool, no RDMA netlink, no devices in sysfs): use
``--sysfs-only`` for port totals without the rdma tool, or run where RDMA NICs are.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flowtracer.collectors.agent.agent import Agent, Sink, StdoutSink
from flowtracer.collectors.agent.config import AgentConfig, ConfigError, load_config
from flowtracer.collectors.agent.sources.registry import SOURCES, SourceUnavailable, create_source
from flowtracer.collectors.self_metrics import SelfMetrics
from flowtracer.config_flags import given_flags
from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_NO_RDMA
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit
from flowtracer.plumbing.kafka_security import kafka_python_kwargs
from flowtracer.schemas.record_identity import IdentityError, load_key, sign

if TYPE_CHECKING:
    from flowtracer.collectors.agent.tracing.processor_feedback import GroupWatch, RequestWatch

log = logging.getLogger("flowtracer.agent")


def record_signer(cfg: AgentConfig) -> Callable[[str, bytes, bytes | None], list[tuple[str, bytes]]] | None:
    """The headers that sign each record as ``cfg.host`` (``host_key_file``), or None when not configured.
    A key file that cannot be read is one line and exit 2; the key itself is never printed."""
    if cfg.host_key_file is None:
        return None
    try:
        key = load_key(cfg.host_key_file, "host_key_file")
    except IdentityError as e:
        click.echo(f"flowtracer agent: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    host = cfg.host
    return lambda topic, k, v: sign(key, host, topic, k, v)


@click.command("agent")
@click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML configuration (deploy/config/agent.yaml); FLOWTRACER_AGENT_* variables override it, flags "
                   "override both (docs/configuration.md).")
@click.option("--source", type=click.Choice(sorted(SOURCES)), default=None,
              help="linux: rdma tool + sysfs; nccl-log: linux + NCCL log tags; sim: simulator host views.")
@click.option("--kafka", metavar="HOST:PORT", default=None, help="Kafka bootstrap; without it, JSON lines on stdout.")
@click.option("--topic", default=None, help="Topic [default: flowtracer.flows.v1].")
@click.option("--no-kafka-idempotence", "no_idem", is_flag=True, default=None,
              help="Plain (non-idempotent) producer, e.g. for the Tansu broker.")
@click.option("--interval", default=None, help="Window length, e.g. 1s, 500ms [default: 1s].")
@click.option("--topology", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Topology file: NIC -> leaf (the FlowBatch key) and the host inventory.")
@click.option("--host", default=None, help="This host's name in the topology [default: short hostname].")
@click.option("--sim-endpoints", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The ready JSON `flowtracer sim` printed (source sim).")
@click.option("--nccl-log", default=None, metavar="GLOB", help="NCCL_DEBUG=INFO log file(s) to tag flows with.")
@click.option("--sysfs-root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="RDMA sysfs root [default: /sys/class/infiniband].")
@click.option("--sysfs-only", is_flag=True, default=None, help="Port totals only; no rdma tool, no flows.")
@click.option("--rdma-command", default=None, help="The rdma program and prefix, e.g. 'nsenter -t 1 -n rdma'.")
@click.option("--no-qp-counters", "no_qp_counters", is_flag=True, default=None,
              help="Do not read per-QP counters (always estimate bytes from PSNs).")
@click.option("--agent-id", default=None, help="Agent id in every batch [default: host:pid].")
@click.option("--peer-exchange/--no-peer-exchange", "peer_exchange", default=None,
              help="Exchange QP ends with the other agents over Kafka to find each flow's dst_ip "
                   "[default: on for linux / nccl-log, off for sim].")
@click.option("--metrics-port", type=int, default=None, help="Serve /metrics and /healthz here (0 = off).")
@click.option("--max-windows", type=int, default=None, help="Stop after this many windows (0 = never).")
@click.option("--inventory-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write this host's inventory (NICs from sysfs, switch ports from --lldp-json) here and exit; "
                   "for `flowtracer topology discover --inventory`.")
@click.option("--lldp-json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="`lldpctl -f json` output: the switch port each NIC hears (with --inventory-out).")
@click.option("--host-key-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              envvar="FLOWTRACER_HOST_KEY_FILE",
              help="This host's record-signing key (hex; flowtracer-host-keys): every record is signed as --host "
                   "(docs/operations.md, Record identity).")
@kafka_config_option
def agent(config_file: Path | None, source: str | None, kafka: str | None, topic: str | None, no_idem: bool | None,
          interval: str | None, topology: Path | None, host: str | None, sim_endpoints: Path | None,
          nccl_log: str | None, sysfs_root: Path | None, sysfs_only: bool | None, rdma_command: str | None,
          no_qp_counters: bool | None, agent_id: str | None, peer_exchange: bool | None, metrics_port: int | None,
          max_windows: int | None, inventory_out: Path | None, lldp_json: Path | None,
          host_key_file: Path | None, kafka_config: Path | None) -> None:
    """Stream RDMA flow records (QPs, RoCEv2 5-tuple, bytes per window) from hosts into Kafka.

    On a real host run one agent per host (--source linux). For the simulator one process acts as
    the agents of all simulated hosts: --source sim --sim-endpoints FILE --topology FILE.
    """
    if inventory_out is not None:
        _write_inventory(inventory_out, host, sysfs_root, lldp_json)
        return
    given = {
        "source": source, "kafka": kafka, "topic": topic, "interval": interval, "topology": topology,
        "host": host, "sim_endpoints": sim_endpoints, "nccl_log": nccl_log, "sysfs_root": sysfs_root,
        "sysfs_only": sysfs_only, "agent_id": agent_id, "metrics_port": metrics_port, "max_windows": max_windows,
        "peer_exchange": peer_exchange, "host_key_file": host_key_file, "rdma_command": rdma_command,
        "no_qp_counters": False if no_qp_counters else None, "no_idem": False if no_idem else None,
    }
    try:
        cfg = load_config(config_file, given_flags(FLAG_FIELDS, given))
        security = kafka_security_or_exit(kafka_config, "flowtracer agent", base=cfg.kafka_security,
                                          bootstrap=cfg.kafka)
        topo = load_topology(cfg.topology) if cfg.topology is not None else None
        if cfg.source == "sim" and topo is None:
            raise ConfigError("source sim needs --topology (the simulated fabric's topology file)")
        src = create_source(cfg)
    except (ConfigError, TopologyError) as e:
        click.echo(f"flowtracer agent: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except SourceUnavailable as e:
        click.echo(f"flowtracer agent: {e}", err=True)
        sys.exit(EXIT_NO_RDMA)

    client_config = kafka_python_kwargs(security) if cfg.kafka else {}
    metrics = SelfMetrics()
    sink: Sink
    if cfg.kafka:
        from flowtracer.collectors.kafka_sink import KafkaSink

        sink = KafkaSink(cfg.kafka, client_id=f"flowtracer-agent-{cfg.agent_id}", max_buffer=cfg.max_buffer,
                         enable_idempotence=cfg.kafka_idempotence, metrics=metrics.sink_metrics(),
                         producer_config=client_config, headers=record_signer(cfg))
    else:
        sink = StdoutSink()
    stop = threading.Event()
    exchange = None
    if cfg.exchanges_peers and cfg.kafka:
        from flowtracer.collectors.agent.peers.ends import MAX_AHEAD_NS
        from flowtracer.collectors.agent.peers.exchange import PeerExchange

        # Only the topology's addresses of the host a table names are taken; its time may lead ours by a window.
        addresses = {h.name: {n.rdma_device: n.ip for n in h.nics} for h in topo.hosts} if topo else None
        exchange = PeerExchange(cfg.kafka, sink, src.hosts(), [h.name for h in topo.hosts] if topo else [],
                                cfg.agent_id, refresh_ns=round(cfg.peer_refresh.total_seconds() * 1e9),
                                max_age_ns=round(cfg.peer_max_age.total_seconds() * 1e9), topic=cfg.peer_topic,
                                client_config=client_config, addresses=addresses,
                                max_ahead_ns=cfg.interval_ns + MAX_AHEAD_NS).start()
    tracer = None
    feedback: list[GroupWatch | RequestWatch] = []
    if cfg.tracing.enabled:
        from flowtracer.collectors.agent.tracing.wiring import TracePublisher, build_tracer

        try:
            if cfg.kafka:
                from flowtracer.plumbing.topic_admin import ensure_topics

                ensure_topics(cfg.kafka, _existing_partitions(cfg.kafka, client_config),
                              client_id=f"flowtracer-agent-{cfg.agent_id}", client_config=client_config)
            tracer = build_tracer(cfg, topo, TracePublisher(sink)).start()
            if cfg.kafka:  # the processor says when traces may no longer hold (docs/tracing.md)
                from flowtracer.collectors.agent.tracing.processor_feedback import GroupWatch, RequestWatch

                feedback = [GroupWatch(cfg.kafka, tracer, cfg.agent_id, client_config=client_config).start(),
                            RequestWatch(cfg.kafka, tracer, cfg.agent_id, client_config=client_config).start()]
        except Exception as e:  # bad settings or an unreachable broker: one line, not a traceback
            click.echo(f"flowtracer agent: tracing: {e}", err=True)
            sink.close(timeout=0)
            sys.exit(EXIT_BAD_INPUT)
    runner = Agent(cfg, src, sink, topo, metrics, exchange=exchange, tracer=tracer)
    try:
        metrics.serve(cfg.metrics_port, health=runner.health)
    except OSError as e:
        click.echo(f"flowtracer agent: {e}", err=True)
        sink.close(timeout=0)
        sys.exit(EXIT_BAD_INPUT)

    def _stop(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping after the current window", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
    log.info("agent %s: source %s, %d host(s), interval %s, sink %s", cfg.agent_id, cfg.source,
             len(src.hosts()), cfg.interval, cfg.kafka or "stdout")
    code = 0
    try:
        stats = runner.run(stop)
        log.info("agent stopped: %d windows, %d batches, %d flows, %d malformed records skipped",
                 stats.windows, stats.batches, stats.flows, stats.malformed)
    except Exception:
        log.exception("agent failed")
        code = EXIT_FAILURE
    finally:
        if exchange is not None:
            exchange.close()
        for watch in feedback:
            watch.close()
        if tracer is not None:
            tracer.close()
        sink.close(timeout=10)
        src.close()
        metrics.stop()
    sys.exit(code)


def _write_inventory(out: Path, host: str | None, sysfs_root: Path | None, lldp_json: Path | None) -> None:
    """``--inventory-out``: this host's NICs (and the switch ports they hear) as one JSON file."""
    import socket

    from flowtracer.collectors.agent.sources.host_inventory import host_inventory, lldp_switch_ports
    from flowtracer.collectors.agent.sources.sysfs import DEFAULT_ROOT, read_sysfs
    from flowtracer.fabric.host_inventory import InventoryError, inventory_json
    from flowtracer.plumbing.config_yaml import read_text

    root = sysfs_root or DEFAULT_ROOT
    try:
        heard = lldp_switch_ports(read_text(lldp_json, InventoryError)) if lldp_json is not None else {}
    except ValueError as e:  # InventoryError is one
        click.echo(f"flowtracer agent: {lldp_json}: {e}" if not isinstance(e, InventoryError)
                   else f"flowtracer agent: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    inventory = host_inventory(host or socket.gethostname().split(".", 1)[0], read_sysfs(root), heard)
    if not inventory.nics:
        click.echo(f"flowtracer agent: {root}: no RDMA port with a RoCE v2 address", err=True)
        sys.exit(EXIT_NO_RDMA)
    out.write_text(inventory_json(inventory), encoding="utf-8")
    click.echo(f"wrote {out}: {inventory.host}, {len(inventory.nics)} NIC(s), "
               f"{sum(1 for n in inventory.nics if n.switch_port)} with a switch port heard over LLDP", err=True)


def _existing_partitions(bootstrap: str, client_config: dict[str, Any]) -> int:
    """The flows topic's partition count when it exists (the co-partitioned topics must match it: the
    processor or an operator chose it), else the contract's default."""
    from kafka import KafkaAdminClient

    from flowtracer.schemas.topics import DEFAULT_PARTITIONS, FLOWS

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="flowtracer-agent-admin", **client_config)
    try:
        if FLOWS.name not in set(admin.list_topics()):  # describing a missing topic may auto-create it
            return DEFAULT_PARTITIONS
        meta = admin.describe_topics([FLOWS.name])
        return len(meta[0]["partitions"]) if meta and not meta[0].get("error_code") else DEFAULT_PARTITIONS
    finally:
        admin.close()


FLAG_FIELDS = {
    "source": "source", "kafka": "kafka", "topic": "topic", "interval": "interval", "topology": "topology",
    "host": "host", "sim_endpoints": "sim_endpoints", "nccl_log": "nccl_log", "sysfs_root": "sysfs_root",
    "sysfs_only": "sysfs_only", "agent_id": "agent_id", "metrics_port": "metrics_port", "max_windows": "max_windows",
    "peer_exchange": "peer_exchange", "host_key_file": "host_key_file", "rdma_command": "rdma_command",
    "no_qp_counters": "qp_counters", "no_idem": "kafka_idempotence",
}
"""Each flag's parameter -> the AgentConfig field it overrides (--no-qp-counters and --no-kafka-idempotence set
their field false)."""
