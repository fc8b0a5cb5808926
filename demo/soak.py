"""The soak run (``make soak``): the whole demo pipeline for a long time, and whether it holds up.

Runs ``flowtracer demo --dataplane kernel --resolver trace --duration D`` (30 minutes unless told) as a
subprocess and, while it runs, samples the resident memory (``VmRSS``) of the demo supervisor and of every
process under it (the embedded broker, the simulator, the processor, the collector, the agents) every
``--sample-every`` seconds, and reads the processor's ``path-loads`` topic (a consumer without a group, from the
beginning, as the demo's own status does). At the end it prints, per process, the RSS slope in MB/min between
``--slope-from`` (5 minutes, at most half the run) and the end (least squares over the samples), and per 5-minute
slice of window ends the traced share and the placement accuracy (the demo's own scoring rules,
``demo/scoring.py``, against the simulator's ground truth), and the incidents of the demo's summary.

Pure parts (:func:`slope_mb_per_min`, :func:`slices`, :func:`label`) are tested without servers; the rest is I/O.
Not run in CI: a soak takes as long as it is told to.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowtracer.embedded.object_store import store_stats

S = 1_000_000_000
SLICE_S = 300.0
"""Accuracy and traced share are reported per slice of this many seconds of window ends."""
KAFKA_ARG = re.compile(r"--kafka (\S+)")


def slope_mb_per_min(samples: Sequence[tuple[float, float]], from_s: float) -> float | None:
    """Least-squares slope of RSS in MB/min over the ``(t_s, rss_mb)`` samples with ``t_s >= from_s``;
    None with fewer than 3 such samples."""
    pts = [(t / 60.0, r) for t, r in samples if t >= from_s]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mr = sum(r for _, r in pts) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    return sum((t - mt) * (r - mr) for t, r in pts) / den if den else None


def slices(ends_ns: Iterable[int], start_ns: int, first_s: float, slice_s: float = SLICE_S) -> dict[int, list[int]]:
    """Window ends (ns) grouped by slice index ``(end - start) // slice_s``; ends before ``first_s`` after
    ``start_ns`` are left out (the first minute: agents, baselines and first traces settle)."""
    out: dict[int, list[int]] = defaultdict(list)
    for e in sorted(ends_ns):
        t = (e - start_ns) / S
        if t >= first_s:
            out[int(t // slice_s)].append(e)
    return dict(out)


def label(argv: Sequence[str]) -> str:
    """A short name for a process from its argv: ``tansu``, ``object-store`` (the broker's S3 server), ``demo``,
    the ``flowtracer`` subcommand (``sim``, ``process``, ``collect``, ``agent``), else the program's base name."""
    prog = Path(argv[0]).name if argv else "?"
    if prog == "tansu":
        return "tansu"
    if "flowtracer.embedded.s3_server" in argv[1:3]:
        return "object-store"
    for sub in ("demo", "sim", "process", "collect", "agent", "diagnose"):
        if sub in argv[1:8]:
            return sub
    return prog


# -- I/O ---------------------------------------------------------------------------------------------------


def rss_mb(pid: int) -> float | None:
    """Resident memory of ``pid`` in MB (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def store_endpoint(argv: Sequence[str]) -> str | None:
    """``http://host:port`` of the object store run with ``argv`` (its ``--host`` and ``--port``), else None."""
    args = dict(itertools.pairwise(argv))
    return f"http://{args.get('--host', '127.0.0.1')}:{args['--port']}" if "--port" in args else None


def store_growth(samples: Sequence[tuple[float, dict[str, Any]]], from_s: float) -> dict[str, Any] | None:
    """What the object store held from ``from_s`` (s) to the end: the slope of its data (MB/min), and per topic
    its bytes at the first sample from ``from_s`` and at the last (the topics that grew most first)."""
    late = [(t, st) for t, st in samples if t >= from_s]
    if len(late) < 3:
        return None
    first, last = late[0][1].get("topics", {}), late[-1][1].get("topics", {})
    growth = {name: (first.get(name, {}).get("bytes", 0), last[name]["bytes"]) for name in last}
    top = sorted(growth.items(), key=lambda kv: kv[1][0] - kv[1][1])[:8]
    return {"data_mb_per_min": _r(slope_mb_per_min([(t, st["bytes"] / 2**20) for t, st in late], from_s), 3),
            "data_mb_first_last": (_r(late[0][1]["bytes"] / 2**20, 1), _r(late[-1][1]["bytes"] / 2**20, 1)),
            "objects_first_last": (late[0][1]["objects"], late[-1][1]["objects"]),
            "topics_bytes_first_last": dict(top)}


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (from /proc: parent ids)."""
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        children[ppid].append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def argv_of(pid: int) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


@dataclass
class PathLoadReader:
    """Reads ``path-loads`` into window end -> path -> (bytes, traced bytes, confidence) on a thread."""

    bootstrap: str
    path_loads: dict[int, dict[str, tuple[int, int, float]]] = field(default_factory=lambda: defaultdict(dict))
    stop: threading.Event = field(default_factory=threading.Event)
    error: str | None = None

    def run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        from flowtracer.schemas import topics
        from flowtracer.schemas.v1 import analytics_pb2

        try:
            consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                     client_id="flowtracer-soak", auto_offset_reset="earliest")
            parts: set[int] = set()
            while not parts and not self.stop.is_set():
                parts = consumer.partitions_for_topic(topics.PATH_LOADS.name) or set()
                time.sleep(0.5)
            tps = [TopicPartition(topics.PATH_LOADS.name, p) for p in sorted(parts)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            while not self.stop.is_set():
                for recs in consumer.poll(timeout_ms=500).values():
                    for r in recs:
                        pl = analytics_pb2.PathLoad.FromString(r.value or b"")
                        self.path_loads[pl.window_end_ns][pl.path_id] = (pl.bytes, pl.traced_bytes, pl.confidence)
            consumer.close()
        except Exception as e:  # the soak still reports memory
            self.error = f"{type(e).__name__}: {e}"


def run(duration_s: float, run_dir: Path, sample_every_s: float, extra: Sequence[str]) -> dict[str, Any]:
    """Run the demo, sample it, score it; return the report (also written to ``run_dir/soak.json``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    demo_dir = run_dir / "demo"
    cmd = [sys.executable, "-m", "flowtracer", "demo", "--dataplane", "kernel", "--resolver", "trace",
           "--duration", f"{duration_s:g}", "--web-port", "0", "--run-dir", str(demo_dir),
           "--summary-json", str(run_dir / "summary.json"), *extra]
    out = (run_dir / "demo.out").open("w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.monotonic()
    rss: dict[str, list[tuple[float, float]]] = defaultdict(list)
    names: dict[int, str] = {}
    reader: PathLoadReader | None = None
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            out.flush()
            lines.append(line)

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    store: list[tuple[float, dict[str, Any]]] = []  # (t_s, the object store's stats by topic)
    next_sample = 0.0
    while proc.poll() is None:
        now = time.monotonic() - t0
        if reader is None:
            found = next((m.group(1) for line in list(lines) if (m := KAFKA_ARG.search(line))), None)
            if found:
                reader = PathLoadReader(found)
                threading.Thread(target=reader.run, daemon=True).start()
        if now >= next_sample:
            for pid in descendants(proc.pid):
                if pid not in names:
                    name = label(argv_of(pid))
                    names[pid] = name if name not in names.values() else f"{name}-{pid}"
                mb = rss_mb(pid)
                if mb is not None:
                    rss[names[pid]].append((now, mb))
                if names[pid] == "object-store" and (endpoint := store_endpoint(argv_of(pid))):
                    with contextlib.suppress(OSError):  # starting or stopping
                        store.append((now, store_stats(endpoint, topics=True)))
            next_sample += sample_every_s
        time.sleep(0.5)
    if reader is not None:
        reader.stop.set()
    pumping.join(timeout=30)  # the demo's last lines (its summary) before the file closes
    out.close()
    ran_s = time.monotonic() - t0
    slope_from = min(300.0, ran_s / 2)
    report: dict[str, Any] = {
        "duration_s": duration_s, "ran_s": round(ran_s, 1), "exit_code": proc.returncode,
        "slope_from_s": slope_from,
        # processes seen in fewer than 3 samples (the simulator's short-lived `ip` calls) only in rss.json
        "rss_mb_per_min": {n: _r(slope_mb_per_min(s, slope_from), 3) for n, s in sorted(rss.items()) if len(s) >= 3},
        "rss_mb_first_last": {n: (_r(s[0][1], 1), _r(s[-1][1], 1)) for n, s in sorted(rss.items()) if len(s) >= 3},
        "path_load_reader_error": reader.error if reader else "no --kafka seen in the demo's output",
        "object_store": store_growth(store, slope_from),
    }
    report |= score(run_dir, demo_dir, reader.path_loads if reader else {})
    (run_dir / "rss.json").write_text(json.dumps(rss) + "\n")
    (run_dir / "store.json").write_text(json.dumps(store) + "\n")
    (run_dir / "soak.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def score(run_dir: Path, demo_dir: Path, path_loads: dict[int, dict[str, tuple[int, int, float]]]) -> dict[str, Any]:
    """Per 5-minute slice: the demo's placement scores on the windows of the slice; and the summary's incidents."""
    from flowtracer.demo.scoring import path_section
    from flowtracer.sim.fabric.ground_truth import GroundTruth

    out: dict[str, Any] = {}
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError) as e:
        summary = {}
        out["summary_error"] = str(e)
    out["incidents"] = [{k: i.get(k) for k in ("kind", "state", "start_s", "end_s", "suspects")}
                        | {"suspects": [s.get("component") for s in i.get("suspects", [])[:2]]}
                        for i in summary.get("incidents", [])]
    out["fim_vs_ground_truth"] = (summary.get("fabric_fim") or {}).get("vs_ground_truth")
    try:
        gt = GroundTruth.load(demo_dir / "sim" / "ground-truth")
    except Exception as e:
        out["slices"] = f"no ground truth: {e}"
        return out
    per_slice = []
    for idx, ends in sorted(slices(path_loads, gt.start_ns, 60.0).items()):
        obs = argparse.Namespace(path_loads={e: path_loads[e] for e in ends})
        p = path_section(obs, gt, 1.0, 60.0)  # type: ignore[arg-type]  # path_section reads .path_loads only
        per_slice.append({"from_s": idx * SLICE_S, "to_s": (idx + 1) * SLICE_S, "windows": p["windows_scored"],
                          "traced_share": p["traced_share"], "path_overlap": p["path_overlap"],
                          "path_load_error": p["path_load_error"],
                          "path_load_error_worst_window": p["path_load_error_worst_window"]})
    out["slices"] = per_slice
    return out


def _r(x: float | None, nd: int) -> float | None:
    return None if x is None else round(x, nd)


def report_lines(rep: dict[str, Any]) -> list[str]:
    """The report as terminal lines."""
    lines = [f"soak: ran {rep['ran_s']:.0f} s (exit {rep['exit_code']}); RSS slope MB/min from "
             f"{rep['slope_from_s']:.0f} s to the end (first -> last MB):"]
    for name, slope in rep["rss_mb_per_min"].items():
        first, last = rep["rss_mb_first_last"].get(name, (None, None))
        lines.append(f"  {name:16s} {'-' if slope is None else f'{slope:+.2f}':>8s}   ({first} -> {last})")
    if (st := rep.get("object_store")) is not None:
        lines.append(f"object store data: {st['data_mb_per_min']:+.2f} MB/min ({st['data_mb_first_last'][0]} -> "
                     f"{st['data_mb_first_last'][1]} MB, {st['objects_first_last'][0]} -> {st['objects_first_last'][1]}"
                     " objects); most grown topics (bytes first -> last):")
        lines += [f"  {name}: {a:,} -> {b:,}" for name, (a, b) in st["topics_bytes_first_last"].items()]
    sl = rep.get("slices")
    if isinstance(sl, list):
        lines.append("per 5-minute slice of window ends (after the first minute):")
        for s in sl:
            lines.append(f"  {s['from_s']:5.0f}-{s['to_s']:5.0f} s  {s['windows']:4d} windows  traced share "
                         f"{s['traced_share']}  bytes on true path {s['path_overlap']}  path load error "
                         f"{s['path_load_error']} (worst window {s['path_load_error_worst_window']})")
    else:
        lines.append(f"slices: {sl}")
    lines.append(f"fabric FIM vs ground truth: {rep.get('fim_vs_ground_truth')}")
    lines.append(f"incidents ({len(rep.get('incidents', []))}):")
    for i in rep.get("incidents", []):
        lines.append(f"  {i['kind']} {i['state']} {i['start_s']}-{i['end_s']} s: {', '.join(i['suspects'])}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flowtracer.demo.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=1800.0, help="seconds [default: 1800]")
    ap.add_argument("--run-dir", type=Path, default=Path(".ft-soak"))
    ap.add_argument("--sample-every", type=float, default=10.0, help="seconds between RSS samples [default: 10]")
    ap.add_argument("demo_args", nargs="*", help="more `flowtracer demo` arguments (after --)")
    a = ap.parse_args(argv)
    rep = run(a.duration, a.run_dir.resolve(), a.sample_every, a.demo_args)
    print("\n".join(report_lines(rep)))
    return 0 if rep["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
