"""``flowtracer demo``: the whole pipeline on one machine, with a live status and a live dashboard.

Starts an embedded Tansu broker, the simulated fabric (FlowTracer's 16-node cluster running NCCL
ring all-reduce, with a known ECMP collision and a link degraded later), the gNMI collector, the
host agents and one processor worker, each as its own ``flowtracer`` subprocess (LocalPipeline).
Output: InfluxDB with ``--influx-url``, else a line-protocol file. The terminal shows a live view read
from the output topics, redrawn in place (demo/live_view.py; compact lines of what changed when not a
terminal); the processor serves the dashboard on 127.0.0.1. At the end (``--duration`` or Ctrl-C) everything
is stopped and a summary is printed (``--summary-json`` writes it in full), with the fabric FIM set against the
simulator's ground truth. docs/demo.md.

Over 400 lines as one thing: the demo's options and the one run loop that starts, watches (status, incidents,
broker memory) and stops them; the pieces it calls live in ``flowtracer.demo``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from flowtracer.demo.broker_limits import BROKER_MEMORY_LIMIT_MB, BROKER_RETENTION_S, MIN_BROKER_RETENTION_S
from flowtracer.demo.cpu_meter import CpuMeter, children_cpu_s, sim_lag_s
from flowtracer.embedded.managed_process import check_port_free
from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_INTERRUPTED_AT_START
from flowtracer.logs import json_logs_requested

if TYPE_CHECKING:
    from flowtracer.demo.scenario import Scenario
    from flowtracer.embedded.tansu import TansuBroker

ROLLING_S = 10.0
HOP_S = 1.0
PARTITIONS = 4
MARKER = ".flowtracer-demo-run"
TOKEN_ENVS = ("FLOWTRACER_INFLUX_TOKEN", "INFLUX_TOKEN")


class PortBusy(Exception):
    """The dashboard's port is taken."""


def _fail(code: int, msg: str) -> None:
    click.echo(f"flowtracer demo: {msg}", err=True)
    sys.exit(code)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def prepare_run_dir(run_dir: Path) -> None:
    """Create ``run_dir``; a previous demo run there is replaced, anything else is refused (ValueError)."""
    if run_dir.exists():
        if not run_dir.is_dir():
            raise ValueError(f"--run-dir {run_dir}: exists and is not a directory")
        if any(run_dir.iterdir()):
            if not (run_dir / MARKER).exists():
                raise ValueError(f"--run-dir {run_dir}: exists, is not empty and is not a previous demo run; "
                                 "choose another directory")
            shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MARKER).write_text("flowtracer demo run directory: replaced by the next demo run\n")


class _Stop:
    """SIGINT/SIGTERM after start-up: ask the main loop to stop, and keep asking nicely while it does."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason = "duration"

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set():
            click.echo("flowtracer demo: still stopping the pipeline, please wait", err=True)
            return
        self.reason = "interrupt" if signum == signal.SIGINT else "terminated"
        self.event.set()


def broker_over_limit(broker: TansuBroker | None, limit_mb: float) -> str | None:
    """Why the demo must stop when the broker's resident memory exceeds ``limit_mb`` MB (0: no limit), else None."""
    if not limit_mb or broker is None:
        return None
    rss = broker.resident_bytes()
    if rss is None or rss <= limit_mb * 1e6:
        return None
    why = ("its memory storage frees no record; --broker-storage objects does" if broker.object_store is None
           else "with its records in the object store it should not grow")
    return (f"the embedded broker holds {rss / 1e6:.0f} MB, over --broker-memory-limit {limit_mb:g} MB: {why} "
            "(docs/operations.md, \"The embedded broker's memory\"); stopping. For longer runs "
            "raise the limit, or run the stages against Apache Kafka with retention (deploy/)")


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command("demo")
@click.option("--duration", type=float, default=None,
              help="Stop after this many seconds (default: run until Ctrl-C).")
@click.option("--web-port", type=int, default=6066, show_default=True,
              help="Dashboard port on 127.0.0.1 (served by the processor); 0 = no dashboard, -1 = any free port.")
@click.option("--influx-url", default=None,
              help="Write to this InfluxDB 2; the token comes from $INFLUX_TOKEN or $FLOWTRACER_INFLUX_TOKEN. "
                   "Default: a line-protocol file.")
@click.option("--influx-org", default="flowtracer", show_default=True, help="InfluxDB organization.")
@click.option("--influx-bucket", default="flowtracer", show_default=True, help="InfluxDB bucket.")
@click.option("--line-protocol-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Line-protocol output without --influx-url [default: RUN_DIR/flowtracer.lp].")
@click.option("--summary-json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the final summary (JSON, docs/demo.md) to this file.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=Path(".ft-demo"),
              show_default=True, help="Logs, simulator output and scenario files (replaced by the next demo run).")
@click.option("--degrade-at", "degrade_at", type=float, default=30.0, show_default=True,
              help="Seconds into the run when a link drops to half capacity; negative = never.")
@click.option("--status-every", type=float, default=2.0, show_default=True,
              help="Seconds between redraws of the live view (a terminal), or between checks for changes to print (a "
                   "pipe, CI, --log-format json).")
@click.option("--dataplane", type=click.Choice(["model", "kernel"]), default="model", show_default=True,
              help="Who forwards: the hash models, or Linux network namespaces (root; docs/kernel-dataplane.md).")
@click.option("--resolver", type=click.Choice(["hash", "infer", "trace"]), default="hash", show_default=True,
              help="How the processor places flows on paths; trace turns path tracing on in the agents.")
@click.option("--topology", "topology_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Fabric topology YAML [default: the 16-host, 4-leaf, 2-spine fabric].")
@click.option("--workload", default=None,
              help="Workload preset or YAML/JSON file (a file runs as written, without the degrade fault) "
                   "[default: known-collision, the demo's ring all-reduce with a harmful collision].")
@click.option("--warmup", type=float, default=20.0, show_default=True,
              help="Seconds after the simulator starts before windows are scored against ground truth.")
@click.option("--trace-max-age", "trace_max_age_s", type=float, default=None,
              help="trace resolver: passed to the processor's --trace-max-age (seconds a path trace places its flow) "
                   "[default: the processor's].")
@click.option("--broker-memory-limit", type=float, default=BROKER_MEMORY_LIMIT_MB, show_default=True,
              help="Stop the demo when the embedded broker's resident memory exceeds this many MB (its memory "
                   "storage frees nothing: docs/operations.md); 0 = no limit.")
@click.option("--broker-storage", type=click.Choice(["objects", "memory"]), default="objects", show_default=True,
              help="Where the embedded broker keeps records: 'objects', a local object store on disk whose topics' "
                   "retention is applied (bounded for any run length); 'memory', the broker's memory, never freed "
                   "(cheaper for a run of minutes). docs/operations.md, \"The embedded broker's memory\".")
@click.option("--broker-retention", "broker_retention_s", type=float, default=BROKER_RETENTION_S, show_default=True,
              help="With --broker-storage objects: seconds the embedded broker keeps inputs and outputs (compacted "
                   "topics keep each key's latest record).")
def demo(duration: float | None, web_port: int, influx_url: str | None, influx_org: str, influx_bucket: str,
         line_protocol_file: Path | None, summary_json: Path | None, run_dir: Path, degrade_at: float,
         status_every: float, dataplane: str, resolver: str, topology_file: Path | None, workload: str,
         warmup: float, trace_max_age_s: float | None, broker_memory_limit: float, broker_storage: str,
         broker_retention_s: float) -> None:
    """Run the whole pipeline on the embedded default, with a live status and dashboard.

    Simulated FlowTracer-like 16-node fabric (NCCL ring all-reduce with an ECMP collision, a link
    degraded after --degrade-at), embedded Kafka-protocol broker, gNMI collector, host agents and
    the stream processor. Ctrl-C or the end of --duration stops everything and prints a summary.
    """
    if duration is not None and duration <= 0:
        _fail(EXIT_BAD_INPUT, f"--duration {duration}: must be positive")
    if status_every <= 0:
        _fail(EXIT_BAD_INPUT, f"--status-every {status_every}: must be positive")
    if trace_max_age_s is not None and not trace_max_age_s > 0:
        _fail(EXIT_BAD_INPUT, f"--trace-max-age {trace_max_age_s}: must be positive")
    if influx_url is not None and not any(os.environ.get(v) for v in TOKEN_ENVS):
        _fail(EXIT_BAD_INPUT, f"--influx-url given but no token: export {' or '.join(TOKEN_ENVS)} "
                              "(never on the command line)")
    if web_port < -1 or web_port > 65535:
        _fail(EXIT_BAD_INPUT, f"--web-port {web_port}: must be 0..65535 (or -1 for any free port)")
    if web_port == -1:
        web_port = free_port()
    if web_port:
        try:
            check_port_free("127.0.0.1", web_port, "the dashboard", PortBusy)
        except PortBusy:
            _fail(EXIT_BAD_INPUT, f"port 127.0.0.1:{web_port} (dashboard, --web-port) is already in use by another "
                                  "program; choose another with --web-port N, or --web-port 0 for no dashboard")
        except OSError as e:
            _fail(EXIT_BAD_INPUT, f"cannot bind 127.0.0.1:{web_port} (dashboard, --web-port): {e.strerror or e}")
    if warmup < 0:
        _fail(EXIT_BAD_INPUT, f"--warmup {warmup}: must be 0 or more seconds")
    if broker_memory_limit < 0:
        _fail(EXIT_BAD_INPUT, f"--broker-memory-limit {broker_memory_limit}: must be 0 (no limit) or more MB")
    if not broker_retention_s >= MIN_BROKER_RETENTION_S:
        _fail(EXIT_BAD_INPUT, f"--broker-retention {broker_retention_s:g}: must be at least "
                              f"{MIN_BROKER_RETENTION_S:g} seconds (a stalled reader must not lose records)")
    if dataplane == "kernel":
        from flowtracer.sim.kernel.netns import missing_capability

        missing = missing_capability()
        if missing is not None:
            _fail(EXIT_BAD_INPUT, f"--dataplane kernel: {missing}")
    from flowtracer.demo.scenario import ScenarioError, write_scenario

    scenario_args: dict[str, Any] = {"degrade_at_s": degrade_at if degrade_at >= 0 else None,
                                     "topology_file": topology_file, "congestion": dataplane == "model"}
    if workload is not None:
        scenario_args["workload"] = workload
    with tempfile.TemporaryDirectory(prefix="flowtracer-demo-check-") as tmp:
        try:  # before the run directory is replaced: bad input must not cost the previous run
            write_scenario(Path(tmp), **scenario_args)  # type: ignore[arg-type]
        except ScenarioError as e:
            _fail(EXIT_BAD_INPUT, str(e))
    run_dir = run_dir.resolve()
    try:
        prepare_run_dir(run_dir)
    except (ValueError, OSError) as e:
        _fail(EXIT_BAD_INPUT, str(e))
    scenario = write_scenario(run_dir / "scenario", **scenario_args)  # type: ignore[arg-type]
    code = run_demo(duration=duration, web_port=web_port, influx_url=influx_url, influx_org=influx_org,
                    influx_bucket=influx_bucket, line_protocol_file=line_protocol_file, summary_json=summary_json,
                    run_dir=run_dir, scenario=scenario, status_every=status_every, dataplane=dataplane,
                    resolver=resolver, warmup_s=warmup, trace_max_age_s=trace_max_age_s,
                    broker_memory_limit_mb=broker_memory_limit, broker_storage=broker_storage,
                    broker_retention_s=broker_retention_s)
    sys.exit(code)


def run_demo(*, duration: float | None, web_port: int, influx_url: str | None, influx_org: str, influx_bucket: str,
             line_protocol_file: Path | None, summary_json: Path | None, run_dir: Path, scenario: Scenario,
             status_every: float, dataplane: str = "model", resolver: str = "hash", warmup_s: float = 20.0,
             trace_max_age_s: float | None = None, broker_memory_limit_mb: float = 0.0,
             broker_storage: str = "objects", broker_retention_s: float = BROKER_RETENTION_S) -> int:
    """Start, watch, stop, summarise. Returns the exit code; nothing is left running when it returns.
    ``trace_max_age_s``: the processor's ``--trace-max-age`` (s), None for its default; ``broker_memory_limit_mb``:
    stop when the embedded broker's resident memory passes it (MB; 0: no limit); ``broker_storage`` and
    ``broker_retention_s``: :class:`~flowtracer.demo.local_pipeline.PipelineOptions`' ``broker_storage`` and
    ``broker_retention_s``."""
    from flowtracer.demo.incidents import IncidentWatch
    from flowtracer.demo.live_view import LiveView, redraws
    from flowtracer.demo.local_pipeline import PipelineError, PipelineOptions
    from flowtracer.demo.node_groups import load_inputs, ops_per_iteration
    from flowtracer.demo.sigint_shield import DemoPipeline, broker_shielded_from_ctrl_c
    from flowtracer.demo.status import Observed, OutputWatcher
    from flowtracer.demo.summary import build_summary, summary_lines
    from flowtracer.demo.view_state import view_state
    from flowtracer.embedded.tansu import TansuError
    from flowtracer.fabric.topology import load_topology
    from flowtracer.stream.diagnosis.publisher import IncidentPublisher
    from flowtracer.stream.runtime.worker import make_sink

    out = click.get_text_stream("stdout")
    printer = LiveView(out, live=redraws(out, json_logs_requested()))
    if influx_url is None:
        line_protocol_file = (line_protocol_file or run_dir / "flowtracer.lp").resolve()
        line_protocol_file.parent.mkdir(parents=True, exist_ok=True)
        line_protocol_file.unlink(missing_ok=True)
    else:
        line_protocol_file = None
    processor_args = ["--rolling-window", f"{ROLLING_S:g}", "--influx-org", influx_org,
                      "--influx-bucket", influx_bucket]
    if web_port:
        processor_args += ["--web-port", str(web_port)]
    if trace_max_age_s is not None:
        processor_args += ["--trace-max-age", f"{trace_max_age_s:g}"]
    options = PipelineOptions(topology=scenario.topology, workload=str(scenario.workload), hop_s=HOP_S,
                              partitions=PARTITIONS, resolvers=(resolver,), influx_url=influx_url,
                              line_protocol_file=line_protocol_file, processor_args=processor_args,
                              sim_args=("--dataplane", dataplane), agent_tracing=resolver == "trace",
                              switch_congestion=scenario.congestion, broker_storage=broker_storage,
                              broker_retention_s=broker_retention_s)
    pipeline = DemoPipeline(options, run_dir)
    dashboard = f"http://127.0.0.1:{web_port}/dashboard/" if web_port else None
    started_at = datetime.now(UTC)
    printer.message(f"flowtracer demo: {scenario.hosts} hosts, {scenario.leaves} leaves, {scenario.spines} "
                    f"spines, {scenario.workload_name}"
                    + (f"; {scenario.degrade_link} degraded to {scenario.capacity:.0%} at {scenario.degrade_at_s:g} s"
                       if scenario.degrade_link else "")
                    + f"; {dataplane} data plane, {resolver} resolver"
                    + (" (agents trace)" if resolver == "trace" else "") + f"; logs in {run_dir}")
    printer.message("starting: broker, simulator, processor, collector, agents ...")
    previous = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    watcher: OutputWatcher | None = None
    node_groups = None
    incidents: IncidentWatch | None = None
    publisher: IncidentPublisher | None = None
    stop = _Stop()
    code = 0
    failure: str | None = None
    t0 = time.monotonic()
    machine_busy = CpuMeter()
    try:
        try:
            with broker_shielded_from_ctrl_c():
                pipeline.start()
        except KeyboardInterrupt:
            pipeline.stop()
            printer.message("flowtracer demo: interrupted while starting; everything started was stopped")
            return EXIT_INTERRUPTED_AT_START
        except (PipelineError, TansuError) as e:
            click.echo(f"flowtracer demo: {_explain(str(e))}", err=True)
            return EXIT_FAILURE
        except Exception as e:  # e.g. topics that cannot be created: one line, not a traceback
            pipeline.stop()
            click.echo(f"flowtracer demo: could not start the pipeline: {type(e).__name__}: {e}", err=True)
            return EXIT_FAILURE
        for s in previous:
            signal.signal(s, stop)
        switches = frozenset(sw for sw in _switch_names(scenario.topology))
        node_groups = load_inputs(scenario.topology, scenario.workload) if scenario.node_groups else None
        observed = Observed(switch_names=switches, watch_flows=node_groups is not None,
                            ops_per_iteration=ops_per_iteration(node_groups[1]) if node_groups else 1)
        watcher = OutputWatcher(pipeline.bootstrap, observed)
        watcher.start()
        try:  # incidents go where the processor writes its measurements (their own file: it rotates its own)
            publisher = IncidentPublisher(pipeline.bootstrap, make_sink(
                influx_url, influx_org, influx_bucket, None, None if influx_url else run_dir / "incidents.lp"))
        except Exception as e:  # the demo goes on without publishing incidents
            printer.message(f"incidents are not published to Kafka: {type(e).__name__}: {e}")
        incidents = IncidentWatch(load_topology(scenario.topology), round(HOP_S * 1e9), on_window=publisher)
        printer.message(f"running since {started_at.astimezone():%H:%M:%S}"
                        + (f" for {duration:g} s" if duration else " until Ctrl-C")
                        + (f"; dashboard: {dashboard}" if dashboard else "")
                        + (f"; writing {line_protocol_file}" if line_protocol_file else f"; writing {influx_url}"))
        printer.message("the first rolling FIM appears after ~15 s (baselines, 3 s grace, 10 s rolling window)")
        printer.message(f"Kafka: {pipeline.bootstrap} (flowtracer top --kafka {pipeline.bootstrap} --topology "
                        f"{scenario.topology}; flowtracer path --kafka {pipeline.bootstrap} --job <job>)")
        title = (f"flowtracer demo: {scenario.hosts} hosts, {scenario.workload_name}"
                 + (f", dashboard {dashboard}" if dashboard else ""))
        t0 = time.monotonic()
        next_status = t0
        while not stop.event.is_set():
            now = time.monotonic()
            if duration is not None and now - t0 >= duration:
                break
            try:
                pipeline.check()
            except PipelineError as e:
                failure = _explain(str(e))
                stop.reason = "stage-failure"
                break
            if now >= next_status and (over := broker_over_limit(pipeline.broker, broker_memory_limit_mb)):
                failure = over
                stop.reason = "broker-memory-limit"
                break
            if now >= next_status:
                with watcher.lock:
                    incidents.advance(watcher.observed)
                    frame = view_state(watcher.observed, title, f"{now - t0:.0f}s" + (f"/{duration:g}s" if duration
                                                                                     else ""),
                                       stages=[(st.name, st.alive()) for st in pipeline.stages],
                                       error=watcher.error)
                printer.show(frame)
                next_status = now + status_every
            stop.event.wait(0.2)
    finally:
        for s in previous:
            signal.signal(s, stop)  # a Ctrl-C while stopping must not leave processes behind
        ran_s = time.monotonic() - t0
        busy = machine_busy.stop()
        sim_lag = sim_lag_s(pipeline.ready.get("ground_truth"), time.time_ns())
        printer.close()
        if watcher is not None:
            printer.message(f"stopping ({stop.reason}) ...")
        pipeline.stop_stages()
        if watcher is not None:
            watcher.drain()
            if incidents is not None:  # the last windows, published before the broker stops
                incidents.advance(watcher.observed, final=True)
            if publisher is not None:
                publisher.close()
        broker_state = pipeline.broker_state()
        pipeline.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failure:
        click.echo(f"flowtracer demo: {failure}", err=True)
        code = EXIT_FAILURE
    assert watcher is not None
    stages = [{"name": st.name, "exit_code": st.proc.returncode, "log": str(st.log_path)} for st in pipeline.stages]
    stages.append({"name": "broker (tansu)", "exit_code": None,
                   "log": str(pipeline.broker.log_path) if pipeline.broker and pipeline.broker.log_path else None})
    sink: dict[str, Any]
    if line_protocol_file is not None:
        load = f"influx write --bucket {influx_bucket} --org {influx_org} --file {line_protocol_file}"
        sink = {"kind": "line-protocol-file", "path": str(line_protocol_file),
                "lines": _count_lines(line_protocol_file), "load_with": load}
    else:
        sink = {"kind": "influxdb", "url": influx_url, "org": influx_org, "bucket": influx_bucket}
    extra = {
        "started_at": started_at.isoformat(timespec="seconds"),
        "ran_s": round(ran_s, 1), "stopped_by": stop.reason, "failure": failure,
        "dataplane": dataplane, "resolver": resolver, "sim_lag_at_stop_s": sim_lag,
        "cpu": {**busy, "stages_cpu_s": children_cpu_s()},
        "scenario": {"topology": str(scenario.topology), "workload": str(scenario.workload),
                     "workload_name": scenario.workload_name,
                     "hosts": scenario.hosts, "leaves": scenario.leaves, "spines": scenario.spines,
                     "degrade": {"link": scenario.degrade_link, "at_s": scenario.degrade_at_s,
                                 "capacity": scenario.capacity} if scenario.degrade_link else None},
        "sink": sink, "dashboard": dashboard, "run_dir": str(run_dir), "stages": stages,
        "watcher_error": watcher.error, "broker": broker_state,
    }
    if publisher is not None:
        extra["incident_records_published"] = publisher.sent
        extra["incident_points_written"] = publisher.lines
    summary = build_summary(watcher.observed, ground_truth_dir=pipeline.ready.get("ground_truth"),
                            rolling_s=ROLLING_S, hop_s=HOP_S, extra=extra, warmup_s=warmup_s, resolver=resolver,
                            incidents=incidents, node_groups=node_groups)
    printer.message(f"flowtracer demo: ran {ran_s:.0f} s, stopped by {stop.reason}; every process stopped")
    for line in summary_lines(summary):
        printer.message("  " + line)
    if line_protocol_file is not None:
        printer.message(f"  line protocol: {line_protocol_file} ({sink['lines']} lines; load with "
                        f"`{sink['load_with']}`)")
    if summary_json is not None:
        try:
            summary_json.parent.mkdir(parents=True, exist_ok=True)
            summary_json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
            printer.message(f"  summary: {summary_json}")
        except OSError as e:
            click.echo(f"flowtracer demo: cannot write --summary-json {summary_json}: {e.strerror or e}", err=True)
            code = code or EXIT_FAILURE
    return code


def _switch_names(topology: Path) -> list[str]:
    from flowtracer.fabric.topology import load_topology

    return [s.name for s in load_topology(topology).switches]


def _count_lines(path: Path) -> int:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return 0


def _explain(message: str) -> str:
    """A stage's failure, with a hint when its log shows a port conflict."""
    low = message.lower()
    if "address already in use" in low or "errno 98" in low or "already in use" in low:
        return ("a port the pipeline needs is already in use (another demo or processor still running? "
                f"pick another --web-port): {message}")
    return message
