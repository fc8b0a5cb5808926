"""``flowtracer sim``: run the simulated fabric (gNMI switches, RDMA host views, NCCL-like traffic).

When everything listens it prints one JSON object on stdout, e.g.::

    {"ready": true, "pid": 4242, "topology": "/tmp/ft/topology.yaml",
     "gnmi": {"leaf01": "127.0.0.1:57400", ...}, "shared_port": false,
     "host_views": "/tmp/ft/hosts", "host_view_dirs": {"host01": "/tmp/ft/hosts/host01", ...},
     "ground_truth": "/tmp/ft/ground-truth", "tick_s": 1.0, "start_ns": ..., "duration_s": 60.0}

then runs until ``--duration`` is over or it gets SIGINT/SIGTERM, and exits 0 having stopped every
server and thread it started. ``topology`` is the topology file rewritten with the endpoints
actually bound (point collectors at it). Logs go to stderr.

``--workload`` takes a preset name (ring-allreduce, tree-allreduce, allgather, reducescatter,
alltoall, pipeline) or a YAML/JSON workload file (format: flowtracer.sim.fabric.workload). The options
--message-size, --channels, --qps-per-connection, --compute-gap, --nodes, --nics-per-node,
--background-flows, --background-rate and --seed shape a preset; with a file they override the
file's values for every job.
"""

from __future__ import annotations

import json
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import click

from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE
from flowtracer.fabric.platform_profiles import platforms
from flowtracer.fabric.speeds import parse_speed
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.sim.fabric.faults import FaultError
from flowtracer.sim.fabric.workload import (
    PRESETS,
    Workload,
    WorkloadError,
    load_workload,
    parse_duration,
    parse_size,
    preset,
    validate_workload,
)
from flowtracer.sim.kernel.netns import KernelFabricError, missing_capability
from flowtracer.sim.kernel.plan import PlanError
from flowtracer.sim.runner import RunnerOptions, SimRunner, run_for
from flowtracer.sim.switches.server import TlsFiles


def _converter(fn: Any, name: str) -> click.ParamType:
    class _T(click.ParamType):
        def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
            try:
                return fn(value)
            except ValueError as e:
                self.fail(str(e), param, ctx)

    _T.name = name
    return _T()


SIZE = _converter(parse_size, "SIZE")
DURATION = _converter(parse_duration, "DURATION")
SPEED = _converter(parse_speed, "SPEED")


def build_workload(workload: str, overrides: dict[str, Any]) -> Workload:
    """A preset with ``overrides``, or a workload file with ``overrides`` applied to every job."""
    if workload in PRESETS:
        return preset(workload, **overrides)
    path = Path(workload)
    if not path.exists() and not path.suffix:
        raise WorkloadError(f"--workload {workload!r}: not a preset ({', '.join(PRESETS)}) and no such file")
    wl = load_workload(path)
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return wl
    data = wl.model_dump()
    job_keys = {"hosts", "nics_per_node", "channels", "qps_per_connection", "compute_gap"}
    for job in data["jobs"]:
        job.update({k: v for k, v in given.items() if k in job_keys})
        for op in job["ops"]:
            if "size" in given:
                op["size"] = given["size"]
    if "seed" in given:
        data["seed"] = given["seed"]
    if given.get("background_flows"):
        bg = {"flows": given["background_flows"]}
        if given.get("background_rate"):
            bg["rate"] = given["background_rate"]
        data["background"] = [*data["background"], bg]
    return validate_workload(data, str(path))


@click.command("sim")
@click.option("--topology", "topology_file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Topology YAML of the fabric to simulate.")
@click.option("--workload", default="ring-allreduce", show_default=True,
              help=f"Preset ({', '.join(PRESETS)}) or a YAML/JSON workload file.")
@click.option("--duration", type=DURATION, default=None,
              help="Stop after this long (e.g. 60s); default: until signalled.")
@click.option("--tick", type=DURATION, default=1.0, show_default=True,
              help="Engine tick: counters move and samples are stamped at multiples of it.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for host views, ground truth and the bound topology [default: a new temp dir].")
@click.option("--message-size", "size", type=SIZE, default=None, help="Per-rank buffer of each op, e.g. 1GiB.")
@click.option("--channels", type=int, default=None, help="NCCL channels per NIC pair.")
@click.option("--qps-per-connection", type=int, default=None, help="QPs per connection (NCCL_IB_QPS_PER_CONNECTION).")
@click.option("--compute-gap", type=DURATION, default=None, help="GPU compute between bursts, e.g. 50ms.")
@click.option("--nodes", type=int, default=None, help="Hosts in the job (the first N of the topology).")
@click.option("--nics-per-node", type=int, default=None, help="NICs (rails) per host used by the job.")
@click.option("--background-flows", type=int, default=None, help="Add this many steady background flows.")
@click.option("--background-rate", type=SPEED, default=None, help="Rate each background flow asks for, e.g. 20G.")
@click.option("--seed", type=int, default=None, help="Random seed (QP numbers, PSNs, background pairs).")
@click.option("--gnmi-address", default="127.0.0.1", show_default=True, help="Address the gNMI servers bind.")
@click.option("--gnmi-ports", type=click.Choice(["topology", "free"]), default="topology", show_default=True,
              help="Bind each switch's port from the topology, or free ports (reported in the ready JSON).")
@click.option("--shared-port", type=int, default=None,
              help="One gNMI server for all switches on this port (0 = free); the gNMI target selects the switch.")
@click.option("--counter32", is_flag=True, help="Switch counters wrap at 2**32 (counter32 mode).")
@click.option("--qpn-reuse", is_flag=True, help="NICs hand out destroyed QP numbers again (tests QP generations).")
@click.option("--no-ground-truth", is_flag=True, help="Write no ground truth (big benchmark fabrics).")
@click.option("--no-host-views", is_flag=True, help="Write no host view files.")
@click.option("--no-coll-log", is_flag=True, help="Leave NCCL COLL lines out of the NCCL logs.")
@click.option("--dataplane", type=click.Choice(["model", "kernel"]), default="model", show_default=True,
              help="Who forwards: the hash models, or a Linux-kernel fabric of network namespaces (root).")
@click.option("--scale", type=float, default=None,
              help="Kernel data plane: modelled bytes per real byte on a veth [default: 100000].")
@click.option("--icmp-limits", type=click.Choice(["generous", "linux"]), default="generous", show_default=True,
              help="Kernel data plane: switch ICMP rate limits (linux = the kernel's 1000 ms / 1000 per s / 50).")
@click.option("--clock-skew", "clock_skew", multiple=True, metavar="SWITCH=[+|-]DURATION",
              help="That switch's clock is off by this much (e.g. leaf01=+90s, spine02=-90s): every timestamp its "
                   "gNMI server sends is skewed; repeatable.")
@click.option("--gnmi-tls-cert", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Serve gNMI over TLS with this PEM certificate (with --gnmi-tls-key).")
@click.option("--gnmi-tls-key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The PEM private key of --gnmi-tls-cert.")
@click.option("--gnmi-client-ca", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Require a client certificate signed by this PEM CA (mutual TLS; with --gnmi-tls-cert). "
                   "Passwords: the topology's credentials (env or file), never here.")
@click.option("--platform", type=click.Choice(platforms()), default=None,
              help="Serve every switch's counters under this vendor profile's paths (fabric/profiles), except "
                   "switches whose topology gnmi.platform names one [default: openconfig].")
def sim(topology_file: Path, workload: str, duration: float | None, tick: float, out_dir: Path | None,
        size: int | None, channels: int | None, qps_per_connection: int | None, compute_gap: float | None,
        nodes: int | None, nics_per_node: int | None, background_flows: int | None, background_rate: int | None,
        seed: int | None, gnmi_address: str, gnmi_ports: str, shared_port: int | None, counter32: bool,
        qpn_reuse: bool, no_ground_truth: bool, no_host_views: bool, no_coll_log: bool, dataplane: str,
        scale: float | None, icmp_limits: str, clock_skew: tuple[str, ...] = (), gnmi_tls_cert: Path | None = None,
        gnmi_tls_key: Path | None = None, gnmi_client_ca: Path | None = None, platform: str | None = None) -> None:
    """Run the simulated fabric; print one JSON line when ready; stop on SIGINT/SIGTERM or --duration."""
    try:
        topo = load_topology(topology_file)
    except TopologyError as e:
        click.echo(f"flowtracer sim: invalid topology: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    overrides = {"size": size, "channels": channels, "qps_per_connection": qps_per_connection,
                 "compute_gap": compute_gap, "hosts": nodes, "nics_per_node": nics_per_node,
                 "background_flows": background_flows, "background_rate": background_rate, "seed": seed}
    try:
        skews = tuple(parse_clock_skew(text, {sw.name for sw in topo.switches}) for text in clock_skew)
    except ValueError as e:
        click.echo(f"flowtracer sim: --clock-skew {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    try:
        tls = gnmi_tls_files(gnmi_tls_cert, gnmi_tls_key, gnmi_client_ca)
    except ValueError as e:
        click.echo(f"flowtracer sim: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if tick <= 0:
        click.echo("flowtracer sim: --tick must be positive", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if scale is not None and not scale > 0:
        click.echo(f"flowtracer sim: --scale must be positive, got {scale}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if dataplane == "kernel":
        missing = missing_capability()
        if missing is not None:
            click.echo(f"flowtracer sim: --dataplane kernel: {missing}", err=True)
            sys.exit(EXIT_BAD_INPUT)
    try:
        wl = build_workload(workload, overrides)
    except WorkloadError as e:
        click.echo(f"flowtracer sim: invalid workload: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    out = out_dir or Path(tempfile.mkdtemp(prefix="flowtracer-sim-"))
    options = RunnerOptions(tick_s=tick, duration_s=duration, gnmi_address=gnmi_address,
                            gnmi_ports=gnmi_ports,  # type: ignore[arg-type]
                            shared_port=shared_port, ground_truth=not no_ground_truth,
                            host_views=not no_host_views, counter32=counter32, qpn_reuse=qpn_reuse,
                            coll_log=not no_coll_log, dataplane=dataplane,  # type: ignore[arg-type]
                            scale=scale, icmp_limits=icmp_limits,  # type: ignore[arg-type]
                            clock_skew=skews, gnmi_tls=tls, platform=platform)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)} \
        if threading.current_thread() is threading.main_thread() else {}
    runner = SimRunner(topo, wl, out, options)
    try:
        run_for(runner, lambda info: click.echo(json.dumps(info)), stop)
    except (WorkloadError, FaultError) as e:
        click.echo(f"flowtracer sim: invalid workload: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except PlanError as e:  # a topology Linux cannot hold
        click.echo(f"flowtracer sim: --dataplane kernel: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except KernelFabricError as e:  # ip failed while building the fabric
        click.echo(f"flowtracer sim: --dataplane kernel: {e}", err=True)
        sys.exit(EXIT_FAILURE)
    except OSError as e:
        click.echo(f"flowtracer sim: {e}", err=True)
        sys.exit(EXIT_FAILURE)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if runner.error is not None:
        click.echo(f"flowtracer sim: engine failed: {runner.error}", err=True)
        sys.exit(EXIT_FAILURE)


def parse_clock_skew(text: str, switches: set[str]) -> tuple[str, float]:
    """``SWITCH=+90s`` -> (switch, seconds; negative = behind). ValueError names what is wrong."""
    name, sep, value = text.partition("=")
    if not sep or name not in switches:
        raise ValueError(f"{text!r}: expected SWITCH=[+|-]DURATION with SWITCH one of the topology's switches")
    sign = -1.0 if value.startswith("-") else 1.0
    return name, sign * parse_duration(value.lstrip("+-"))


def gnmi_tls_files(cert: Path | None, key: Path | None, client_ca: Path | None) -> TlsFiles | None:
    """The gNMI servers' TLS files from the options, each checked readable; None = plaintext.
    ValueError names the option and file that is wrong."""
    if cert is None and key is None and client_ca is None:
        return None
    if cert is None or key is None:
        raise ValueError("--gnmi-tls-cert and --gnmi-tls-key go together (--gnmi-client-ca needs both)")
    for option, path in (("--gnmi-tls-cert", cert), ("--gnmi-tls-key", key), ("--gnmi-client-ca", client_ca)):
        if path is None:
            continue
        try:
            head = path.read_bytes()[:4096]
        except OSError as e:
            raise ValueError(f"{option}: cannot read {path}: {e.strerror}") from None
        if b"-----BEGIN " not in head:
            raise ValueError(f"{option}: {path} is not a PEM file")
    return TlsFiles(cert, key, client_ca)
