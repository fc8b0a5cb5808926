"""``flowtracer topology``: generate, check, discover (over gNMI) and compare topology files."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from flowtracer.collectors.gnmi.config import ConfigError, Encoding, Gnmi, credentials_in_clear
from flowtracer.collectors.gnmi.discovery.build import build_topology
from flowtracer.collectors.gnmi.discovery.fetch import DiscoveryError, read_all
from flowtracer.collectors.gnmi.discovery.targets import endpoint, load_targets
from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE
from flowtracer.fabric.ecmp_hash import HashAlgorithm
from flowtracer.fabric.host_inventory import InventoryError, load_inventory
from flowtracer.fabric.routing import Fabric, summarize
from flowtracer.fabric.speeds import parse_speed
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.fabric.topology_diff import diff_topologies
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.target_security import SecretError


class SpeedType(click.ParamType):
    name = "SPEED"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            return parse_speed(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


@click.group()
def topology() -> None:
    """Generate, validate, discover and compare fabric topologies."""


@topology.command("generate")
@click.option("--hosts", type=int, required=True, help="Number of hosts (GPU servers).")
@click.option("--nics-per-host", type=int, default=1, show_default=True, help="RDMA NICs per host.")
@click.option("--leaves", type=int, required=True, help="Number of leaf switches (all rails together).")
@click.option("--spines", type=int, required=True, help="Number of spine switches.")
@click.option("--rails", type=int, default=None,
              help="Rail-optimized: NIC k of every host on rail k, each rail its own leaves. "
                   "Default: one rail per NIC when --nics-per-host > 1 and it divides --leaves, else 1.")
@click.option("--parallel-links", type=int, default=1, show_default=True, help="Cables between each leaf and spine.")
@click.option("--link-speed", type=SpeedType(), default="400G", show_default=True, help="Leaf-spine link speed.")
@click.option("--host-speed", type=SpeedType(), default=None, help="NIC speed [default: --link-speed].")
@click.option("--name", default="fabric", show_default=True, help="Fabric name.")
@click.option("--gnmi-address", default="127.0.0.1", show_default=True, help="gNMI address of every switch.")
@click.option("--gnmi-base-port", type=int, default=57400, show_default=True,
              help="gNMI port of the first switch; the others count up.")
@click.option("--hash-algorithm", type=click.Choice([a.value for a in HashAlgorithm]), default="crc16-ccitt",
              show_default=True, help="ECMP hash algorithm of every switch.")
@click.option("--hash-seed", type=int, default=0, show_default=True, help="ECMP hash seed of every switch.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the YAML here instead of stdout.")
def generate_cmd(hosts: int, nics_per_host: int, leaves: int, spines: int, rails: int | None,
                 parallel_links: int, link_speed: int, host_speed: int | None, name: str, gnmi_address: str,
                 gnmi_base_port: int, hash_algorithm: str, hash_seed: int, output: Path | None) -> None:
    """Build a 2-tier leaf-spine fabric (plain or rail-optimized) and print it as topology YAML."""
    if rails is None:
        rails = nics_per_host if nics_per_host > 1 and leaves % nics_per_host == 0 else 1
    spec = FabricSpec(hosts=hosts, nics_per_host=nics_per_host, leaves=leaves, spines=spines,
                      parallel_links=parallel_links, rails=rails, link_speed_bps=link_speed,
                      host_speed_bps=host_speed or link_speed, name=name, gnmi_address=gnmi_address,
                      gnmi_base_port=gnmi_base_port, hash_algorithm=HashAlgorithm(hash_algorithm),
                      hash_seed=hash_seed)
    try:
        topo = generate(spec)
    except TopologyError as e:
        click.echo(f"flowtracer topology generate: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    text = topo.to_yaml()
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}: {len(topo.switches)} switches, {len(topo.hosts)} hosts", err=True)


@topology.command("check")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def check_cmd(file: Path, as_json: bool) -> None:
    """Validate a topology file and print a summary; exit 2 with a one-line reason if it is bad."""
    try:
        topo = load_topology(file)
    except TopologyError as e:
        click.echo(f"invalid topology: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    summary = summarize(Fabric(topo))
    if as_json:
        click.echo(json.dumps(summary))
        return
    roles = ", ".join(f"{n} {r}" for r, n in summary["switches"].items())  # type: ignore[attr-defined]
    lo, hi = summary["paths_between_leaves"]  # type: ignore[misc]
    click.echo(f"{file}: ok: fabric {summary['name']!r}: {roles}; {summary['hosts']} hosts, "
               f"{summary['nics']} NICs on {summary['rails']} rail(s); {summary['switch_links']} switch links; "
               f"{summary['ecmp_groups']} ECMP groups; {lo}-{hi} equal-cost paths between leaves; "
               f"oversubscription {summary['oversubscription']}:1")


@topology.command("discover")
@click.option("--targets", "targets_file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Targets YAML (like gnmic's targets file) or a simulator's ready JSON.")
@click.option("--out", "output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the topology YAML here instead of stdout.")
@click.option("--name", default="fabric", show_default=True, help="Fabric name written to the file.")
@click.option("--encoding", type=click.Choice([e.value for e in Encoding]), default=None,
              help="gNMI encoding of the Get requests [default: each target's profile's: proto for OpenConfig].")
@click.option("--rpc", type=click.Choice(["get", "once"]), default="get", show_default=True,
              help="gNMI Get (Subscribe ONCE for a target without Get), or Subscribe ONCE for every target.")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds per gNMI call.")
@click.option("--inventory", "inventory_files", type=click.Path(dir_okay=False, path_type=Path), multiple=True,
              help="A host's inventory (`flowtracer agent --inventory-out`); repeat per host. Names and places NICs "
                   "the switches' LLDP does not.")
def discover_cmd(targets_file: Path, output: Path | None, name: str, encoding: str | None, rpc: str, timeout: float,
                 inventory_files: tuple[Path, ...]) -> None:
    """Read LLDP neighbors, interfaces and the AFT of every target over gNMI; write the topology."""
    try:
        inventories = [load_inventory(f) for f in inventory_files]
    except InventoryError as e:
        click.echo(f"flowtracer topology discover: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    try:
        loaded = load_targets(targets_file)
        targets = loaded.targets
        for w in loaded.warnings:
            click.echo(f"warning: {w}", err=True)
        for t in targets:  # gnmic's lab files pair insecure: true with a password: allowed, never silently
            if credentials_in_clear(t):
                click.echo(f"warning: target {t.name}: username/password sent over plaintext gRPC (insecure / "
                           "tls.enabled false): anyone on the path can read them; use TLS outside a lab", err=True)
        gnmi = Gnmi(encoding=Encoding(encoding)) if encoding else Gnmi()  # unset: each target's profile's
        facts, warnings = asyncio.run(read_all(targets, gnmi, timeout, rpc))
    except (ConfigError, SecretError) as e:
        click.echo(f"flowtracer topology discover: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except (DiscoveryError, ConnectionError) as e:
        click.echo(f"flowtracer topology discover: {e}", err=True)
        sys.exit(EXIT_FAILURE)
    try:
        found = build_topology(facts, {t.name: endpoint(t) for t in targets}, name, inventories)
    except TopologyError as e:
        click.echo(f"flowtracer topology discover: what the switches say is not a valid fabric: {e}", err=True)
        sys.exit(EXIT_FAILURE)
    for w in (*warnings, *found.warnings):
        click.echo(f"warning: {w}", err=True)
    topo = found.topology
    text = topo.to_yaml()
    if found.derived:  # marked in the file too: these groups are the links' rule, not what the switch said
        text = f"# ECMP groups derived from the links (no AFT routes read): {', '.join(found.derived)}\n{text}"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
    click.echo(f"discovered {len(topo.switches)} switches, {len(topo.links)} links, {len(topo.hosts)} hosts, "
               f"{len(topo.ecmp_groups)} ECMP groups" + (f": wrote {output}" if output else ""), err=True)


@topology.command("diff")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
def diff_cmd(a: Path, b: Path) -> None:
    """Name every difference between topology files A and B, one line each; exit 0 if none, 1 if any."""
    try:
        ta, tb = load_topology(a), load_topology(b)
    except TopologyError as e:
        click.echo(f"invalid topology: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    lines = diff_topologies(ta, tb)
    for line in lines:
        click.echo(line)
    sys.exit(EXIT_FAILURE if lines else 0)
