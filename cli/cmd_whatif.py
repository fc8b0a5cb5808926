"""``flowtracer whatif``: replay recorded traffic under other routing strategies; ``--experiment`` reproduces
FlowTracer's ECMP-vs-static result and regenerates docs/reproduction.md.

Recorded traffic comes from Kafka (``--kafka``, the flow topic and the processor's outputs over a
time range) or from a file ``flowtracer export`` wrote (``--input``). ``--experiment prime-spray`` runs PRIME's
scenarios on the packet-level spraying model instead (no recording) and prints its report; ``--experiment
heterogeneous`` records the demo's ring over a slow node group and prints ``--node-group``'s report. Every
strategy is replayed on the healthy fabric and, when ``--degrade``/``--fail`` are given, under those conditions
too. Output: a table (stdout), ``--json``, ``--out DIR`` (PNG figures and a self-contained report.html),
``--plan FILE`` (per-flow source ports / QPs as CSV). docs/whatif.md describes the strategies and
metrics.

Exit codes: 0 done; 1 runtime failure (broker unreachable, pipeline died); 2 bad input.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from flowtracer.cmd_export import narrow, range_options, read_range
from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.kafka_options import kafka_config_option

log = logging.getLogger("flowtracer.whatif")

EXPERIMENTS = ("flowtracer-16", "prime-spray", "heterogeneous")
#: The options that only ``--experiment prime-spray`` reads.
SPRAY_OPTIONS = {"spray_fabric": "--fabric", "packets": "--packets", "seeds": "--seed",
                 "spray_scenarios": "--scenario"}
#: The options ``--experiment prime-spray`` does not read (it has no recording and writes no docs/reproduction).
NOT_SPRAY_OPTIONS = {"topology": "--topology", "kafka": "--kafka", "input_file": "--input", "from_ns": "--from",
                     "to_ns": "--to", "last_ns": "--last", "strategies": "--strategy", "degrade": "--degrade",
                     "fail": "--fail", "plan_file": "--plan", "docs_dir": "--docs",
                     "record_seconds": "--record-seconds", "draws": "--draws", "save_recording": "--save-recording",
                     "node_groups": "--node-group", "ops_per_iteration": "--ops-per-iteration"}


def _fail(code: int, msg: str) -> None:
    click.echo(f"flowtracer whatif: {msg}", err=True)
    sys.exit(code)


@click.command("whatif")
@click.option("--topology", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Topology YAML of the recorded fabric (required unless --experiment).")
@click.option("--kafka", metavar="HOST:PORT", default=None, help="Read the recording from this Kafka.")
@click.option("--input", "input_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Read the recording from a `flowtracer export` file.")
@range_options
@click.option("-s", "--strategy", "strategies", multiple=True, metavar="NAME[:k=v,...]",
              help="Strategy to replay (repeatable): ecmp, e-ecmp, static-dst, sport-plan, qp-scale, spray, "
                   "spray-adaptive, least-utilized [default: all, ecmp first].")
@click.option("--degrade", multiple=True, metavar="END=FRACTION",
              help="Also replay with this cable (switch:port or host:rdma_device) at FRACTION of its capacity.")
@click.option("--fail", multiple=True, metavar="END", help="Also replay with this cable out of service.")
@click.option("--json", "as_json", is_flag=True, help="Print the full results as JSON instead of the table.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write figures (PNG) and a self-contained report.html here.")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the per-flow plans (sport-plan ports and flow labels, qp-scale QPs) as CSV.")
@click.option("--idle", "idle_s", type=float, default=3.0, show_default=True,
              help="Kafka: stop reading after this many seconds without a new record.")
@click.option("--experiment", type=click.Choice(EXPERIMENTS), default=None,
              help="Run an experiment and report: flowtracer-16 (records through the real pipeline, writes "
                   "reproduction.md), heterogeneous (records the demo's ring over a slow node group: --node-group's "
                   "report) or prime-spray (the packet-level spraying model on PRIME's scenarios, no recording).")
@click.option("--docs", "docs_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("docs"),
              show_default=True, help="--experiment: where reproduction.md and figures/ go.")
@click.option("--record-seconds", type=float, default=32.0, show_default=True,
              help="--experiment: seconds of traffic to record through the pipeline.")
@click.option("--draws", type=int, default=100, show_default=True,
              help="--experiment: ECMP hash seeds and QP numberings to replay.")
@click.option("--save-recording", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="--experiment: also export the recording to this file.")
@click.option("--fabric", "spray_fabric", default="4x4x4", show_default=True, metavar="LxSxH",
              help="--experiment prime-spray: leaves x spines x hosts per leaf of the abstract fabric.")
@click.option("--packets", default="512", show_default=True, metavar="N",
              help="--experiment prime-spray: packets (4096 B) per flow.")
@click.option("--seed", "seeds", multiple=True, metavar="N",
              help="--experiment prime-spray: a seed (repeatable); each draws the permutation and the random path "
                   "choices [default: 0 1 2].")
@click.option("--scenario", "spray_scenarios", multiple=True, metavar="NAME",
              help="--experiment prime-spray: permutation, degraded, failed or mixed (repeatable) [default: all].")
@click.option("--node-group", "node_groups", multiple=True, metavar="HOST[,HOST...]:RATE[:xSCALE]",
              help="Hosts with slower NICs (RATE, e.g. 200G) and/or GPUs (xSCALE: compute takes SCALE times as long); "
                   "repeatable. Instead of the strategies: the job's measured iteration time per node group, and "
                   "its iteration time and FIM with every node fast.")
@click.option("--ops-per-iteration", type=click.IntRange(min=1), default=1, show_default=True,
              help="--node-group: NCCL collectives per training iteration of the job.")
@kafka_config_option
def whatif(topology: Path | None, kafka: str | None, input_file: Path | None, from_ns: int | None,
           to_ns: int | None, last_ns: int | None, strategies: tuple[str, ...], degrade: tuple[str, ...],
           fail: tuple[str, ...], as_json: bool, out_dir: Path | None, plan_file: Path | None, idle_s: float,
           experiment: str | None, docs_dir: Path, record_seconds: float, draws: int,
           save_recording: Path | None, spray_fabric: str, packets: str, seeds: tuple[str, ...],
           spray_scenarios: tuple[str, ...], node_groups: tuple[str, ...], ops_per_iteration: int,
           kafka_config: Path | None) -> None:
    """Replay recorded flows under other routing strategies: FIM, max link utilization, completion time.

    Examples:

      flowtracer whatif --topology fabric.yaml --kafka 127.0.0.1:9092 --last 60s --degrade leaf01:Ethernet5=0.5

      flowtracer whatif --topology fabric.yaml --input rec.jsonl -s ecmp -s sport-plan --plan plan.csv

      flowtracer whatif --topology fabric.yaml --input rec.jsonl --node-group host13,host14,host15,host16:200G

      flowtracer whatif --experiment flowtracer-16

      flowtracer whatif --experiment prime-spray --fabric 2x4x4 --seed 1 --scenario degraded --json

      flowtracer whatif --experiment heterogeneous --record-seconds 20
    """
    given = [flag for name, flag in {**SPRAY_OPTIONS, **NOT_SPRAY_OPTIONS}.items()
             if click.get_current_context().get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    if experiment != "prime-spray" and (spray := [f for f in given if f in SPRAY_OPTIONS.values()]):
        _fail(EXIT_BAD_INPUT, f"{spray[0]} applies to --experiment prime-spray only")
    if experiment == "prime-spray":
        if other := [f for f in given if f in NOT_SPRAY_OPTIONS.values()]:
            _fail(EXIT_BAD_INPUT, f"{other[0]} does not apply to --experiment prime-spray")
        run_spray(spray_fabric, packets, seeds, spray_scenarios, as_json, out_dir)
        return
    if experiment == "heterogeneous":
        run_heterogeneous(record_seconds, save_recording, as_json)
        return
    if experiment is not None:
        if draws < 1:
            _fail(EXIT_BAD_INPUT, "--draws must be at least 1")
        run_experiment(docs_dir, record_seconds, draws, save_recording)
        return
    from flowtracer.whatif.fabric import ConditionError, ReplayFabric, parse_conditions
    from flowtracer.whatif.record import RecordingError, read_export, windows
    from flowtracer.whatif.replay import measured, replay_all
    from flowtracer.whatif.report import document, plan_csv, table
    from flowtracer.whatif.strategies import DEFAULT_STRATEGIES, StrategyError, parse_strategy

    if topology is None:
        _fail(EXIT_BAD_INPUT, "--topology is required (the fabric the traffic was recorded on)")
    if (kafka is None) == (input_file is None):
        _fail(EXIT_BAD_INPUT, "give exactly one of --kafka and --input")
    assert topology is not None
    try:
        fabric = Fabric(load_topology(topology))
    except TopologyError as e:
        _fail(EXIT_BAD_INPUT, f"invalid topology: {e}")
    try:
        specs = [parse_strategy(s) for s in (strategies or DEFAULT_STRATEGIES)]
    except StrategyError as e:
        _fail(EXIT_BAD_INPUT, str(e))
    try:
        conds = [ReplayFabric(fabric)]
        if degrade or fail:
            conds.append(ReplayFabric(fabric, parse_conditions(fabric, degrade, fail)))
    except ConditionError as e:
        _fail(EXIT_BAD_INPUT, str(e))
    if input_file is not None:
        try:
            rec = narrow(read_export(input_file), from_ns, to_ns, last_ns)
        except RecordingError as e:
            _fail(EXIT_BAD_INPUT, str(e))
    else:
        assert kafka is not None
        rec = read_range(kafka, from_ns, to_ns, last_ns, idle_s, prog="flowtracer whatif", kafka_config=kafka_config)
    wins, lost = windows(rec, fabric)
    if not wins:
        _fail(EXIT_BAD_INPUT, f"no flow records in the range from {rec.source or input_file}")
    if lost.flows:
        log.warning("%d flows (%d bytes) name NICs the topology does not have; left out", lost.flows, lost.bytes)
    if node_groups:
        slow_group_report(rec, wins, fabric, node_groups, ops_per_iteration, as_json)
        return
    results = replay_all(wins, conds, specs)
    meas = {conds[0].conditions.label: measured(rec, conds[0])}
    meta = {"source": rec.source, "from_ns": wins[0].start_ns, "to_ns": wins[-1].end_ns, "windows": len(wins),
            "topology": str(topology), "strategies": [s.label for s in specs]}
    if plan_file is not None:
        try:
            plan_file.write_text(plan_csv(results), encoding="utf-8")
        except OSError as e:
            _fail(EXIT_FAILURE, f"cannot write {plan_file}: {e.strerror or e}")
    if out_dir is not None:
        write_report(out_dir, results, meta)
    if as_json:
        click.echo(json.dumps(document(results, meta, meas), indent=1))
    else:
        click.echo(table(results, meas))


def slow_group_report(rec: Any, wins: list[Any], fabric: Fabric, specs: tuple[str, ...], ops_per_iteration: int,
                      as_json: bool) -> None:
    """``--node-group``: the job's iteration time per node group and with every node fast
    (whatif/reproductions/slow_group.py)."""
    from flowtracer.whatif.iterations import host_sample
    from flowtracer.whatif.reproductions.slow_group import NodeGroupError, job_report, parse_node_group, report_lines

    try:
        groups = [parse_node_group(s) for s in specs]
    except NodeGroupError as e:
        _fail(EXIT_BAD_INPUT, str(e))
    known = {h.name for h in fabric.topology.hosts}
    for g in groups:
        unknown = [h for h in g.hosts if h not in known]
        if unknown:
            _fail(EXIT_BAD_INPUT, f"--node-group {g.name}: the topology has no host {unknown[0]!r}")
    rep = job_report([host_sample(b) for b in rec.flow_batches], wins, fabric, groups, ops_per_iteration)
    if rep["iteration_s"] is None:
        _fail(EXIT_BAD_INPUT, "--node-group: no NCCL communicator's opCount advanced in the recording (the agents tag "
                              "QPs from the NCCL log: see docs/agent.md), so the job's iteration time is unknown")
    if as_json:
        click.echo(json.dumps({"version": 1, "node_groups": rep}, indent=1))
        return
    click.echo(f"job over node groups: {len(rep['hosts'])} hosts, iteration {rep['iteration_s'] * 1e3:.1f} ms "
               f"measured (the agents' NCCL opCount per window, {ops_per_iteration} collective(s) per iteration)")
    for line in report_lines(rep):
        click.echo("  " + line)


def write_report(out_dir: Path, results: list[Any], meta: dict[str, Any]) -> None:
    """PNG figures and a self-contained report.html in ``out_dir``."""
    from flowtracer.whatif.figures import FiguresUnavailable, strategy_figures
    from flowtracer.whatif.report import html_page

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        figs = strategy_figures(results)
        for f in figs:
            (out_dir / f"{f.name}.png").write_bytes(f.png)
        intro = (f"Replay of {meta['windows']} windows from {meta['source']} on {meta['topology']}; "
                 "FIM per docs/fim.md, time = communication time of the recorded volume under max-min fair sharing.")
        page = html_page("flowtracer what-if", intro, results, [(f.caption, f.svg) for f in figs])
        (out_dir / "report.html").write_text(page, encoding="utf-8")
    except OSError as e:
        _fail(EXIT_FAILURE, f"cannot write to {out_dir}: {e.strerror or e}")
    except FiguresUnavailable as e:
        _fail(EXIT_FAILURE, str(e))
    click.echo(f"wrote {len(figs)} figures and report.html to {out_dir}", err=True)


# -- PRIME's scenarios on the packet-level spraying model ----------------------------------------------

SPRAY_REPORT = "prime-spray"

SPRAY_HEADING = "PRIME's scenarios on the packet-level spraying model"
SPRAY_NOTE = ("Generated by `flowtracer whatif --experiment prime-spray` (`make reproduce`); do not edit by hand, "
              "rerun the command. docs/whatif.md states the model, its limits and what the numbers mean; the raw "
              "results are in [prime-spray.json](prime-spray.json).")


def _count(flag: str, text: str, low: int) -> int:
    """``text`` as an int of at least ``low``, or one error line naming ``flag``."""
    try:
        n = int(text)
    except ValueError:
        n = low - 1
    if n < low:
        _fail(EXIT_BAD_INPUT, f"{flag} {text!r}: needs a whole number of at least {low}")
    return n


def run_spray(fabric_text: str, packets_text: str, seed_texts: tuple[str, ...], scenario_keys: tuple[str, ...],
              as_json: bool, out_dir: Path | None) -> None:
    """Run the spraying family on PRIME's scenarios; print the Markdown report (or ``--json``) and, with
    ``--out``, write prime-spray.md and prime-spray.json there."""
    from flowtracer.whatif.reproductions.spray_report import document, markdown
    from flowtracer.whatif.reproductions.spray_scenarios import run_all, select
    from flowtracer.whatif.reproductions.spray_sim import LeafSpine

    parts = fabric_text.lower().split("x")
    if len(parts) != 3:
        _fail(EXIT_BAD_INPUT, f"--fabric {fabric_text!r}: expected LEAVESxSPINESxHOSTS_PER_LEAF, e.g. 4x4x4")
    leaves, spines, hosts = (_count("--fabric", p, low) for p, low in zip(parts, (2, 1, 1), strict=True))
    fabric = LeafSpine(leaves=leaves, spines=spines, hosts_per_leaf=hosts)
    packets = _count("--packets", packets_text, 1)
    seeds = [_count("--seed", s, 0) for s in seed_texts] or [0, 1, 2]
    try:
        names = select(scenario_keys) if scenario_keys else None
    except ValueError as e:
        _fail(EXIT_BAD_INPUT, f"--scenario: {e}")
    t0 = time.monotonic()
    runs = run_all(fabric, packets, seeds, names)
    meta = {"experiment": SPRAY_REPORT, "fabric": f"{leaves}x{spines}x{hosts}", "leaves": leaves, "spines": spines,
            "hosts_per_leaf": hosts, "line_rate_bps": fabric.line_rate_bps, "packet_bytes": fabric.packet_bytes,
            "packets": packets, "seeds": seeds, "elapsed_s": round(time.monotonic() - t0, 2)}
    doc = document(runs, meta)
    page = markdown(doc)
    if out_dir is not None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{SPRAY_REPORT}.md").write_text(f"# {SPRAY_HEADING}\n\n{SPRAY_NOTE}\n\n{page}",
                                                        encoding="utf-8")
            (out_dir / f"{SPRAY_REPORT}.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        except OSError as e:
            _fail(EXIT_FAILURE, f"cannot write to {out_dir}: {e.strerror or e}")
        click.echo(f"wrote {SPRAY_REPORT}.md and {SPRAY_REPORT}.json to {out_dir}", err=True)
    click.echo(json.dumps(doc, indent=1) if as_json else page, nl=as_json)


# -- the reproduction ------------------------------------------------------------------------------------

#: The job order of the second phase: a topology-unaware placement (a fixed shuffle of the 16 hosts).
SHUFFLE_SEED = 16
#: Phase A starts once collectors and agents are connected and runs ~10 s (an iteration takes ~60 ms:
#: 2 GB per NIC at 400G plus 50 ms of compute); phase B starts well after it ended.
PHASE_A_START_S = 2.0
PHASE_A_ITERATIONS = 160
PHASE_B_START_S = 15.0


def experiment_workload(hosts: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Two ring all-reduce jobs on all 16 hosts, one after the other: ranks in leaf order, then shuffled."""
    shuffled = hosts[:]
    random.Random(SHUFFLE_SEED).shuffle(shuffled)
    op = {"collective": "allreduce", "algorithm": "ring", "size": "1GiB"}
    job = {"channels": 2, "qps_per_connection": 1, "compute_gap": "50ms", "ops": [op]}
    return {"seed": 7, "mtu": 4096, "jobs": [
        {"name": "ring-leaf-order", "hosts": hosts, "start": PHASE_A_START_S, "iterations": PHASE_A_ITERATIONS,
         **job},
        {"name": "ring-shuffled", "hosts": shuffled, "start": PHASE_B_START_S, **job},
    ]}, shuffled


def record(topo: Any, workload: dict[str, Any], record_seconds: float, save_recording: Path | None) -> Any:
    """Run ``workload`` on ``topo`` through the real pipeline (sim, collect, agent, process on an embedded Tansu
    broker) for ``record_seconds`` and read the recording back from Kafka; also export it to ``save_recording``."""
    import yaml

    from flowtracer.demo.local_pipeline import LocalPipeline, PipelineError, PipelineOptions
    from flowtracer.whatif.kafka_reader import read_kafka
    from flowtracer.whatif.record import write_export

    with tempfile.TemporaryDirectory(prefix="flowtracer-whatif-") as tmp:
        run_dir = Path(tmp)
        topo_file = run_dir / "topology.yaml"
        topo_file.write_text(topo.to_yaml(), encoding="utf-8")
        wl_file = run_dir / "workload.yaml"
        wl_file.write_text(yaml.safe_dump(workload, sort_keys=False), encoding="utf-8")
        click.echo(f"recording {record_seconds:.0f} s of traffic through the pipeline (sim, collect, agent, "
                   "process on an embedded Tansu broker)...", err=True)
        pipeline = LocalPipeline(PipelineOptions(topology=topo_file, workload=str(wl_file), partitions=4,
                                                 log_level="warning"), run_dir / "run")
        try:
            with pipeline:
                pipeline.wait(record_seconds)
                pipeline.stop_stages()
                rec = read_kafka(pipeline.bootstrap, idle_s=3.0)
        except PipelineError as e:
            _fail(EXIT_FAILURE, f"the pipeline failed: {e}")
        except Exception as e:  # kafka-python's errors: one line, not a trace
            _fail(EXIT_FAILURE, f"cannot read the recording from the embedded broker: {type(e).__name__}: {e}")
    if save_recording is not None:
        try:
            with save_recording.open("w", encoding="utf-8") as fh:
                write_export(rec, fh)
        except OSError as e:
            _fail(EXIT_FAILURE, f"cannot write {save_recording}: {e.strerror or e}")
    return rec


def run_heterogeneous(record_seconds: float, save_recording: Path | None, as_json: bool) -> None:
    """Record the demo's heterogeneous job (a ring over 16 hosts, leaf04's four at 200G) through the pipeline and
    report the slow group's cost: ``--node-group`` on that recording, with the workload's own node groups."""
    from flowtracer.demo.scenario import DEMO_SPEC, heterogeneous_workload
    from flowtracer.fabric.topology_generate import generate
    from flowtracer.whatif.record import windows

    topo = generate(DEMO_SPEC)
    workload = heterogeneous_workload()
    rec = record(topo, workload, record_seconds, save_recording)
    fabric = Fabric(topo)
    wins, _ = windows(rec, fabric)
    specs = tuple(",".join(g["hosts"]) + ":" + str(g.get("nic_rate") or "") + f":x{g.get('compute_scale', 1)}"
                  for g in workload["node_groups"])
    slow_group_report(rec, wins, fabric, specs, 1, as_json)


def run_experiment(docs_dir: Path, record_seconds: float, draws: int, save_recording: Path | None) -> None:
    """Record through the real pipeline, replay, write docs/reproduction.md and docs/figures/."""
    from flowtracer.fabric.topology_generate import FabricSpec, generate
    from flowtracer.whatif.figures import FiguresUnavailable, experiment_figures, pyplot
    from flowtracer.whatif.record import windows
    from flowtracer.whatif.reproductions.flowtracer16 import analyse, split_phases
    from flowtracer.whatif.reproductions.flowtracer16_page import markdown

    t0 = time.monotonic()
    try:
        pyplot()  # before half a minute of recording, not after
    except FiguresUnavailable as e:
        _fail(EXIT_FAILURE, str(e))
    topo = generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16"))
    fabric = Fabric(topo)
    hosts = [h.name for h in topo.hosts]
    workload, shuffled = experiment_workload(hosts)
    rec = record(topo, workload, record_seconds, save_recording)
    recorded_at = time.monotonic()
    wins, _ = windows(rec, fabric)
    phases = split_phases(wins, [("leaf-order", "ranks in leaf order"),
                                 ("shuffled", "ranks placed without regard to leaves")])
    if len(phases) < 2:
        _fail(EXIT_FAILURE, f"the recording has {len(phases)} usable job phases, expected 2 "
                            "(try a longer --record-seconds)")
    exp = analyse(rec, fabric, phases, draws=draws, seeds=draws)
    exp.meta.update({"ring_orders": {"leaf-order": hosts, "shuffled": shuffled}, "record_seconds": record_seconds,
                     "recording_source": "sim -> collect/agent -> Kafka (Tansu) -> process",
                     "flow_batches": len(rec.flow_batches), "link_loads": len(rec.link_loads),
                     "fim_samples": len(rec.fims), "pipeline_s": round(recorded_at - t0, 1)})
    figs_dir = docs_dir / "figures"
    figs = experiment_figures(exp)
    exp.meta["total_s"] = round(time.monotonic() - t0, 1)
    try:
        figs_dir.mkdir(parents=True, exist_ok=True)
        for f in figs:
            (figs_dir / f"{f.name}.png").write_bytes(f.png)
        (figs_dir / "reproduction.json").write_text(json.dumps(exp.to_dict(), indent=1), encoding="utf-8")
        (docs_dir / "reproduction.md").write_text(markdown(exp, figs), encoding="utf-8")
    except OSError as e:
        _fail(EXIT_FAILURE, f"cannot write to {docs_dir}: {e.strerror or e}")
    click.echo(f"wrote {docs_dir / 'reproduction.md'} and {len(figs)} figures in {exp.meta['total_s']:.0f} s",
               err=True)
