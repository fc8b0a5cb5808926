"""docs/benchmarks.md from the results of ``run_all.py``: the component table (ours / the raw library limit of
the same run), the tracing and kernel data-plane sections, the whole-pipeline tables, and the hand-measured
sections of the old report kept as they are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stage_latency import STAGES

KEPT = ("## Congestion counters on and off", "## Catch-up: workers of one app id on a recorded backlog",
        "## Output producer: batches per partition (issue 30)",
        "## The worker's hot path: batches, one step per batch, metrics at scrape time (issue 30)",
        "## Latency by stage: the fetch wait", "## Failover at the short fetch wait", "## Simulator (test bed)",
        "## Whole pipeline at 256 and 512 hosts")
"""Headings of the sections measured by hand (paired on/off runs, the catch-up of bench_catchup.py, before/after
runs of stage_latency.py, bench_failover.py and bench_sim.py, the pipeline at sizes ``--pipeline-at`` runs: longer
than ``make bench`` can afford): kept as they are, at the end, when the report is rewritten."""


@dataclass
class Result:
    """What one benchmark script gave: its parsed output (``data``) or its error, time (s) and peak RSS."""

    name: str
    ok: bool
    seconds: float
    peak_rss_mib: float | None
    data: Any = None
    error: str = ""


def _g(d: Any, *path: Any) -> Any:
    for p in path:
        if d is None:
            return None
        d = d[p] if isinstance(d, list) and isinstance(p, int) and p < len(d) else \
            d.get(p) if isinstance(d, dict) else None
    return d


def _n(x: Any, fmt: str = ",.0f") -> str:
    return "n/a" if x is None else format(x, fmt)


def component_rows(res: dict[str, Result]) -> list[list[str]]:
    """One row per component: what it does per second, the raw limit, ours/raw, peak RSS."""
    rows = []

    def row(name: str, r: Result | None, ours: str, raw: str, ratio: Any, note: str = "") -> None:
        if r is None or not r.ok:
            rows.append([name, "failed" if r else "not run", (" ".join(r.error[:80].split()) if r else ""), "", "", ""])
            return
        rows.append([name, ours, raw, _n(ratio, ".3f"), _n(r.peak_rss_mib, ".0f"), note])

    c = res.get("collector")
    d = c.data if c and c.ok else {}
    row("gNMI collector (decode, deltas, batches, Kafka)", c,
        f"{_n(_g(d, 'collector', 'updates_per_s'))} counter updates/s",
        f"{_n(_g(d, 'raw', 'updates_per_s'))}/s grpc.aio receive + protobuf decode",
        _g(d, "ratio", "updates_per_s"), f"per CPU-s: {_n(_g(d, 'ratio', 'updates_per_cpu_s'), '.3f')}")
    a = res.get("agent")
    d = a.data if a and a.ok else {}
    pb = _g(d, "parse_build")
    row("host agent (parse `rdma -j`, build FlowBatch)", a,
        f"10k QPs in {_n(_g(pb, 'parse_plus_build_ms'), '.0f')} ms",
        f"{_n(_g(pb, 'json_loads_ms'), '.0f')} ms stdlib json.loads of the same text",
        1 / pb["ratio_to_json_loads"] if pb and pb.get("ratio_to_json_loads") else None,
        f"CPU at 1 s, 2k QPs: {_g(d, 'agent_cpu', 'cpu_share_at_1s_interval')}")
    p = res.get("processor")
    d = p.data if p and p.ok else {}
    row("stream processor, one worker (pure stages + encoding)", p,
        f"{_n(_g(d, 'worker', 'flows_per_s'))} flow records/s + {_n(_g(d, 'worker', 'counters_per_s'))} "
        f"interface counter sets/s ({_n(_g(d, 'worker', 'batches_per_s'))} batches/s)",
        f"{_n(_g(d, 'decode', 'batches_per_s'))} batches/s protobuf ParseFromString",
        _g(d, "ratio"), f"{_n(_g(d, 'realtime_share'), '.2f')} CPU-s per 1 s window of "
        f"{_g(d, 'fabric', 'nics')} NICs / {_g(d, 'fabric', 'switches')} switches")
    s = res.get("sink")
    d = s.data if s and s.ok else {}
    row("InfluxDB sink (to VictoriaMetrics)", s, f"{_n(_g(d, 'sink_pts_per_s'))} points/s",
        f"{_n(_g(d, 'raw_pts_per_s'))} points/s influxdb-client batching WriteApi", _g(d, "sink_ratio"),
        f"line encoding {_n(_g(d, 'encode_ratio'), '.2f')}x influxdb-client Point")
    g = res.get("gnmi_server")
    d = g.data if g and g.ok else {}
    r0 = _g(d, "results", 0)
    lib = _g(r0, "ratio_to_library")
    row("simulated gNMI servers (test bed)", g,
        f"{_n(_g(r0, 'updates_per_s'))} updates/s, {_n(_g(r0, 'server_cpu_us_per_update'), '.2f')} us CPU/update",
        f"{_n(_g(r0, 'naive_build_us_per_update'), '.2f')} us/update building the messages with the library",
        1 / lib if lib else None, f"{_g(d, 'scenario', 'switches')} switches, latency p99 "
        f"{_n(_g(r0, 'latency_ms_p99'), '.0f')} ms")
    i = res.get("infer")
    d = i.data if i and i.ok else []
    runs = [x for x in (d if isinstance(d, list) else [d]) if isinstance(x, dict)]
    large = next((x for x in runs if x.get("fabric") == "large"), runs[-1] if runs else None)
    row("infer resolver, steady window", i,
        f"{_n(_g(large, 'steady_ms', 'p50'), '.0f')} ms/window ({_g(large, 'nics')} NICs, {_g(large, 'flows')} flows)",
        f"{_n(_g(large, 'floor_ms'), '.1f')} ms: a dict lookup per flow (the hash resolver's cost)",
        1 / large["steady_vs_floor"] if large and large.get("steady_vs_floor") else None,
        f"accuracy {_g(large, 'accuracy')}")
    return rows


def _section_data(res: dict[str, Result], name: str) -> tuple[Any, str]:
    """A benchmark's parsed output, or why there is none ("" when there is)."""
    r = res.get(name)
    if r is None:
        return None, "Not run."
    if not r.ok:
        return None, f"Failed: {r.error[:200]}"
    return r.data, ""


def tracing_section(res: dict[str, Result]) -> list[str]:
    """Path tracing: probes/s and tracer CPU per probe on both transports vs raw socket loops, and the time
    to first placement (bench_tracing)."""
    d, why = _section_data(res, "tracing")
    if why:
        return [why]
    rows = []
    for side, name in (("sim", "sim (responder in another process)"), ("kernel", "kernel (namespace fabric)")):
        x = d.get(side) or {}
        if "skipped" in x:
            rows.append([name, "skipped", x["skipped"], "", "", ""])
            continue
        raw, ours = x.get("raw") or {}, x.get("tracer_unlimited") or {}
        rows.append([name + ", unlimited budget", f"{_n(ours.get('probes_per_s'))}",
                     f"{_n(ours.get('cpu_us_per_probe'), '.1f')}",
                     f"{_n(raw.get('probes_per_s'))} probes/s, {_n(raw.get('cpu_us_per_probe'), '.1f')} us/probe",
                     _n(x.get("ratio_probes_per_s"), ".3f"), _n(x.get("ratio_cpu_per_probe"), ".2f")])
        if "tracer_2000" in x:
            t = x["tracer_2000"]
            rows.append([name + ", budget 2,000/s", _n(t["probes_per_s"]), _n(t["cpu_us_per_probe"], ".1f"),
                         "", "", ""])
    ttfp = []
    for x in _g(d, "sim", "time_to_first_placement") or []:
        hi, lo = x["high"], x["default"]
        ttfp.append([f"{x['flows']:,}", f"{lo['first_complete_s'] * 1e3:.0f} ms" if lo["first_complete_s"] else "n/a",
                     f"{_n(lo.get('all_traced_s_projected'), ',.0f')} s (projected from {lo['traced']} traces in "
                     f"{lo['seconds']:.0f} s; arithmetic {x['flows']:,} x {hi['probes_per_trace']} / 50 = "
                     f"{_n(lo.get('all_traced_s_arithmetic'), ',.0f')} s)",
                     f"{_n(hi['budget_per_s'])}/s: {hi['first_complete_s'] * 1e3:.0f} ms" if hi["first_complete_s"]
                     else "n/a", f"{_n(hi['all_traced_s'], '.1f')} s measured ({_n(hi['probes_per_s'])} probes/s)"])
    return [md_table(["transport", "tracer probes/s", "tracer CPU us/probe", "raw loop (same run)",
                      "ours / raw probes/s", "CPU/probe ours / raw"], rows), "",
            "Raw loops: sim = 64 JSON requests in flight on one loopback socket to the same responder; kernel = 64",
            "sockets in the host's namespace with a TTL-1 probe each in flight (`send` + `poll` +",
            "`recvmsg(MSG_ERRQUEUE)`). The tracer's CPU per probe on the kernel transport includes opening one socket",
            "per trace inside the host namespace (a thread that enters it); 256 flows, ~2.5 probes each.", "",
            "**Time to first placement** (sim transport, one host's flows seen at once, 64 traces at once):", "",
            md_table(["flows", "first complete trace, default 50 probes/s", "all flows traced, default budget",
                      "first complete, high budget", "all flows traced, high budget"], ttfp)]


def kernel_section(res: dict[str, Result]) -> list[str]:
    """The kernel data plane's largest real-time fabric (bench_kernel_dataplane)."""
    d, why = _section_data(res, "kernel_dataplane")
    if why:
        return [why]
    if "skipped" in d:
        return [f"Skipped: {d['skipped']}"]
    raw = d.get("raw_sendto") or {}
    rows = []
    for x in [*d.get("runs", []), *([d["low_scale_run"]] if d.get("low_scale_run") else [])]:
        if "skipped" in x:
            rows.append([x["size"], "", "skipped: " + x["skipped"], "", "", "", "", ""])
            continue
        if "tick_late_ms_max" not in x:
            rows.append([f"{x['hosts']} / {x['leaves']} / {x['spines']}", _n(x.get("scale"), ",.0f"), "error", "",
                         "", "", "", ""])
            continue
        rows.append([f"{x['hosts']} / {x['leaves']} / {x['spines']} ({x['namespaces']} ns)", _n(x["scale"], ",.0f"),
                     "yes" if x["keeps_real_time"] else "**no**",
                     f"{_n(x['tick_late_ms_p50'], '.0f')} / {_n(x['tick_late_ms_max'], '.0f')} ms; "
                     f"{x['ticks_done']} / {x['ticks_due']} ticks",
                     f"{x['cpu_cores']:.2f} (machine busy {x['machine_busy_share']:.0%})",
                     f"{_n(x['frames_sent_per_s'])} / {_n(x['switch_veth_rx_packets_per_s'])}",
                     f"{_n(x['frames_sent_per_s'] / raw['packets_per_s'], '.3f')}" if raw.get("packets_per_s") else "",
                     f"{x['setup_s']:.2f} / {x['teardown_s']:.2f}"])
    big = d.get("largest_real_time")
    head = ("**Largest real-time fabric**: " + (f"{big['hosts']} hosts / {big['leaves']} leaves / {big['spines']} "
            f"spines at scale {big['scale']:,.0f}" if big else "none") +
            f". Raw limit (same run): one Python thread `sendto` of 1 KiB datagrams through a veth fabric: "
            f"{_n(raw.get('packets_per_s'))} packets/s ({_n(raw.get('cpu_us_per_packet'), '.1f')} us CPU each).")
    return [head, "", md_table(["hosts / leaves / spines", "scale", "keeps real time",
                                "tick completed late p50 / max; ticks done / due", "CPU (cores) of the sim process",
                                "frames sent/s / switch veth rx packets/s", "frames sent / raw sendto",
                                "setup / teardown s"], rows), "",
            "`flowtracer.sim.runner.SimRunner` with `RunnerOptions(dataplane=\"kernel\")`, default ring all-reduce",
            "over every host, 1 s ticks; a tick is computed at its wall-clock end, so \"late\" is how long after its",
            "end it completed (traffic update + `ip -s -j link show` of every switch). A size keeps real time when no",
            "steady tick completed more than one tick late and no tick was lost; the first that does not ends the",
            "series, and it (else the largest) is run again at a coarser scale (fewer real frames per modelled byte).",
            "Namespaces are removed by the fabric's own run record."]


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def pipeline_tables(pipes: list[dict[str, Any]]) -> tuple[str, str]:
    """The whole-pipeline table (one row per size) and the per-stage latency table."""
    prow = []
    for x in pipes:
        if "latency" not in x:
            prow.append([f"{x['hosts']} / {x['leaves']} / {x['spines']}", "", "", "", "",
                         x.get("error") or f"skipped: {x.get('skipped')}"])
            continue
        st = x["stages"]
        cpu = ", ".join(f"{k.split('-')[0]} {v['cpu_share']:.2f}" for k, v in st.items())
        mem = ", ".join(f"{k.split('-')[0]} {v['peak_rss_mib']:.0f}" for k, v in st.items())
        prow.append([f"{x['hosts']} / {x['leaves']} / {x['spines']}",
                     "yes" if x["keeps_up"] else f"**no**: {x['limited_by']}",
                     f"{_n(x['latency']['p50_s'], '.2f')} / {_n(x['latency']['p99_s'], '.2f')}",
                     _n(x["lag_at_stop_s"], ".1f"), f"{x['fabric_windows_steady']} / {x['expected_windows']}",
                     f"CPU (cores): {cpu}; RSS MiB: {mem}"])
    ptable = md_table(["hosts / leaves / spines", "keeps up", "latency p50 / p99 s", "lag at stop s",
                       "fabric windows / expected", "stages"], prow)
    srow = []
    for x in pipes:
        b = x.get("stage_latency") or {}
        if not b.get("windows"):
            continue
        srow.append([f"{x['hosts']} / {x['leaves']} / {x['spines']}", str(b["windows"])]
                    + [f"{b['marks'][k]['p50_s']:.2f} / {b['marks'][k]['p99_s']:.2f}" for k in STAGES])
    stable = md_table(["hosts / leaves / spines", "windows", *(f"{k} p50 / p99 s" for k in STAGES)], srow)
    return ptable, stable


def report(m: dict[str, Any], res: dict[str, Result], pipes: list[dict[str, Any]], total_s: float) -> str:
    rows = component_rows(res)
    table = md_table(["component", "measured", "raw library limit (same run)", "ours / raw", "peak RSS MiB",
                      "notes"], rows)
    first = next((x for x in pipes if "latency" in x), None)
    lat = first["latency"] if first else {}
    ok = [x for x in pipes if x.get("keeps_up")]
    largest = ok[-1] if ok else None
    bad = next((x for x in pipes if "latency" in x and not x["keeps_up"]), None)
    err = next((x for x in pipes if "error" in x or "skipped" in x), None)
    proc = res["processor"].data if "processor" in res and res["processor"].ok else None
    share = _g(proc, "realtime_share")
    cap_nics = _g(proc, "fabric", "nics") / share if share else None
    cap_flows = _g(proc, "per_window", "flows") / share if share else None
    summary = [
        f"- **End-to-end latency** (switch sample instant = window end -> LinkLoad produced to Kafka and written "
        f"to the store), 16-host fabric, steady state: p50 {_n(lat.get('p50_s'), '.2f')} s, "
        f"p99 {_n(lat.get('p99_s'), '.2f')} s, max {_n(lat.get('max_s'), '.2f')} s over {lat.get('samples', 0)} "
        "link loads.",
        "- **Largest real-time fabric** (whole pipeline on this machine, one processor worker): "
        + (f"{largest['hosts']} hosts / {largest['switches']} switches kept up" if largest else "none kept up")
        + (f"; {bad['hosts']} hosts / {bad['switches']} switches lagged (lag at stop "
           f"{_n(bad['lag_at_stop_s'], '.1f')} s), limited by the {bad['limited_by']}"
           + (f" (its engine fell up to {bad['sim_ticks_behind_max']} ticks behind real time)"
              if bad["limited_by"].startswith("simulator") else "") if bad else "")
        + (f"; {err['hosts']} hosts: {err.get('error') or 'skipped (' + err['skipped'] + ')'}" if err else "")
        + ".",
        "- **Processor alone** (bench_processor, one worker, in process): "
        + (f"{_n(_g(proc, 'realtime_share'), '.2f')} CPU-s per 1 s window for {_n(_g(proc, 'fabric', 'nics'))} NICs "
           f"/ {_n(_g(proc, 'per_window', 'flows'))} flows / {_g(proc, 'fabric', 'switches')} switches, so one "
           f"worker with a whole core keeps up with about {_n(cap_nics)} NICs ({_n(cap_flows)} flows) of this "
           "density; more workers split the partitions (docs/stream.md)." if cap_nics else "not measured.")
        ,
        "- **Peak memory**: per component in the table (largest process of each benchmark, from wait4); "
        "per pipeline stage below (VmHWM).",
    ]
    ptable, stable = pipeline_tables(pipes)
    mrows = [["CPU", f"{m['nproc']} x {m['cpu']}"], ["memory", f"{m['memory_gib']} GiB"],
             ["Python", m["python"]], ["kernel", m["kernel"]],
             ["load average at start (1/5/15 min)", " / ".join(f"{x:.2f}" for x in m["load_avg_start"])],
             ["packages", ", ".join(f"{k} {v}" for k, v in m["packages"].items())],
             ["commit", m["commit"] or "n/a"], ["date", m["date"]], ["whole run", f"{total_s:.0f} s"]]
    times = ", ".join(f"{r.name} {r.seconds:.0f} s" for r in res.values())
    return "\n".join([
        "# Benchmarks",
        "",
        "Generated by `make bench` (`bench/run_all.py`); do not edit by hand, except the sections after \"Whole",
        "pipeline\" (measured by hand, too long for `make bench`, which carries them over). Every throughput is a",
        "ratio to a raw library limit measured in the same run on the same machine, because absolute numbers on a",
        "shared 2-core machine move with whatever else runs (compare the load average). Each component's own script",
        "documents its scenario in its docstring; run one alone with `.venv/bin/python bench/bench_<name>.py`.",
        "",
        "## Machine",
        "",
        md_table(["", ""], mrows),
        "",
        "## Components",
        "",
        table,
        "",
        "`ours / raw` is throughput relative to the library limit (1 = as fast as the library alone; for the agent,",
        "the gNMI servers and infer it is the inverse of the cost ratio their scripts print).",
        "",
        "## Path tracing",
        "",
        *tracing_section(res),
        "",
        "## Kernel data plane",
        "",
        *kernel_section(res),
        "",
        "## Whole pipeline",
        "",
        *summary,
        "",
        ptable,
        "",
        "Each size runs the simulator (`--no-ground-truth`, ring all-reduce over every host), the gNMI collector,",
        "the host agents, Tansu and one processor worker writing line protocol, all on this machine, for",
        f"{first['seconds'] if first else 30:.0f} s; steady state = windows ending 12 s after the start. A size",
        "keeps up when the newest fabric window at stop is at most 8 s old, at least 80% of the expected fabric",
        "windows were finalized and the p99 latency is at most 10 s. The first size that does not ends the series,",
        "and the stage that could not keep up is named: the simulator when its engine fell behind real time",
        "(`sim.log`), the collector when switch streams stalled, else the processor. CPU is per stage in cores",
        "(1.0 = one core); on a shared machine a stage can fall behind below one core because others hold the CPUs.",
        "",
        "### Where the latency goes",
        "",
        stable,
        "",
        "Per window ending at E, seconds after E from the Kafka timestamps of one run's topics",
        "(`bench/stage_latency.py`, which also runs alone): `sampled` every switch sampled past E;",
        "`counters_in_kafka` the newest of those samples' CounterBatches in Kafka; `flows_in_kafka` the newest",
        "FlowBatch of the window; `attributions` the flows stage released the window; `link_loads` the links stage",
        "did (the latency above); `fabric` the fabric stage's FimSample, the end of the chain. Over windows that",
        "have every mark, from 12 s after the start.",
        "",
        f"Script times: {times}.",
        "",
    ])


def kept_section(old: str) -> str:
    """The hand-measured sections of the old report, each from its heading to the next ``## `` heading ("" if
    none), in ``KEPT`` order."""
    out = []
    for heading in KEPT:
        start = old.find(heading + "\n")
        if start < 0:
            continue
        end = old.find("\n## ", start + len(heading))
        out.append((old[start:] if end < 0 else old[start:end + 1]).rstrip("\n") + "\n")
    return "\n".join(out)
