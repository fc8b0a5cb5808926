"""``flowtracer collect``: stream switch counters over gNMI into Kafka until stopped."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

import click

from flowtracer.collectors.gnmi.config import (
    ConfigError,
    check_transport_security,
    load_config,
    resolve_targets,
)
from flowtracer.collectors.gnmi.service import CollectorService
from flowtracer.config_flags import given_flags
from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit

log = logging.getLogger("flowtracer.collect")


def _bad(msg: str) -> None:
    click.echo(f"flowtracer collect: {msg}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def build(topology: Path | None, config: Path | None, kafka: str | None, shard: str | None,
          metrics_port: int | None, collector_id: str | None, idempotence: bool | None,
          kafka_config: Path | None = None) -> CollectorService:
    """Load the config (file < FLOWTRACER_COLLECTOR_* < these flags) and the topology into a service;
    ConfigError/TopologyError on bad input."""
    cfg = load_config(config, given_flags(FLAG_FIELDS, {
        "topology": topology, "kafka": kafka, "shard": shard, "metrics_port": metrics_port,
        "collector_id": collector_id, "idempotence": idempotence}))
    security = kafka_security_or_exit(kafka_config, "flowtracer collect", base=cfg.kafka.security,
                                      bootstrap=cfg.kafka.bootstrap)
    if security != cfg.kafka.security:
        cfg = cfg.model_copy(update={"kafka": cfg.kafka.model_copy(update={"security": security})})
    topo = load_topology(cfg.topology) if cfg.topology is not None else None
    targets = resolve_targets(cfg, topo)
    if not targets:
        raise ConfigError("no targets: give a topology with gNMI endpoints (--topology or topology:) or targets "
                          "in --config")
    for t in targets:  # fail fast on missing secrets, before any connection
        t.credentials.resolve()
    for warning in check_transport_security(cfg, targets):
        log.warning("%s", warning)
    return CollectorService(cfg, targets)


@click.command("collect")
@click.option("--topology", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Topology YAML: every switch with a gnmi endpoint is a target.")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Collector YAML (deploy/config/collector.yaml); FLOWTRACER_COLLECTOR_* variables override it, "
                   "flags override both (docs/configuration.md).")
@click.option("--kafka", default=None, metavar="HOST:PORT", envvar="FLOWTRACER_KAFKA",
              help="Kafka bootstrap servers (overrides kafka.bootstrap).")
@click.option("--shard", default=None, metavar="I/N", help="Collect only shard I of N (0-based) of the targets.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve /metrics and /healthz on 127.0.0.1:PORT (0 = off).")
@click.option("--collector-id", default=None, help="Id written into every batch [default: host:pid].")
@click.option("--idempotence/--no-idempotence", default=None,
              help="Kafka idempotent producer [default: auto]; --no-idempotence for Tansu.")
@kafka_config_option
def collect(topology: Path | None, config: Path | None, kafka: str | None, shard: str | None,
            metrics_port: int | None, collector_id: str | None, idempotence: bool | None,
            kafka_config: Path | None) -> None:
    """Stream switch interface and next-hop counters over gNMI into Kafka (flowtracer.counters.v1).

    Runs until SIGINT/SIGTERM, then flushes what is buffered. Passwords come from the environment
    or files named in the topology/config, never from the command line.
    """
    try:
        svc = build(topology, config, kafka, shard, metrics_port, collector_id, idempotence, kafka_config)
    except (ConfigError, TopologyError) as e:
        _bad(str(e))
        return
    try:
        asyncio.run(_run(svc))
    except OSError as e:  # e.g. the metrics port is taken
        click.echo(f"flowtracer collect: {e}", err=True)
        sys.exit(EXIT_FAILURE)


async def _run(svc: CollectorService) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, svc.stop)
    await svc.run()


FLAG_FIELDS = {
    "topology": "topology", "kafka": "kafka.bootstrap", "shard": "shard", "metrics_port": "metrics.port",
    "collector_id": "collector_id", "idempotence": "kafka.idempotence",
}
"""Each flag's parameter -> the CollectorConfig field it overrides (dotted: nested)."""
