"""Where each flow goes (issue 36), on a real `flowtracer demo` run against the simulator's ground truth.

One run (module fixture): the ring all-reduce preset on the demo's fabric with the hash resolver on the model data
plane, and one leaf uplink taken down LINK_DOWN_AT_S in (the simulator's own fault schedule). While it runs,
``flowtracer path --job ring-allreduce --follow --format json`` reads the flow-paths topic of the demo's broker
(printed by the demo), and a one-shot ``flowtracer path --job ring-allreduce --format json`` lists the job's flows
LIST_AT_S in, before the fault. After the run, the listing, the changes and the demo summary's per-flow score are
compared with the simulator's ground truth.

Known gap, not this feature's: when a leaf's uplink goes down the simulator moves the flows *into* that leaf from
other leaves off the dead spine, but those leaves' AFTs (what their gNMI servers stream) do not withdraw the spine,
so the hash resolver cannot know and keeps them on their old path. The per-flow score names exactly those flows.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from waiting import wait_for

from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import preset

pytestmark = pytest.mark.slow

S = 1_000_000_000
JOB = "ring-allreduce"
RUN_S = 40
WARMUP_S = 10
LIST_AT_S = 12
LINK_DOWN_AT_S = 24
DOWN = "leaf01:Ethernet5"  # leaf01's uplink to spine01


class Lines:
    """A process's stdout lines with the wall clock (ns) each was read at, read as they come (a thread)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[tuple[int, str]] = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append((time.time_ns(), line.rstrip("\n")))

    def find(self, pattern: str) -> re.Match[str] | None:
        for _, line in list(self.lines):
            m = re.search(pattern, line)
            if m:
                return m
        return None


@dataclass
class Run:
    summary: dict[str, Any]
    gt: GroundTruth
    follow: list[tuple[int, dict[str, Any]]]  # (wall clock ns printed, record)
    listing: list[dict[str, Any]]
    listed_at_ns: int
    path_stderr: str


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("demo-flow-paths")
    workload = preset(JOB).model_dump(mode="json")
    workload["faults"] = [{"at": f"{LINK_DOWN_AT_S}s", "link_down": DOWN}]
    (tmp / "workload.yaml").write_text(yaml.safe_dump(workload, sort_keys=False))
    summary = tmp / "summary.json"
    # Files, not pipes, for what the processes log: a full pipe nobody reads would block them.
    demo_err = open(tmp / "demo.err", "w")  # noqa: SIM115 - closed below
    follow_err = open(tmp / "follow.err", "w")  # noqa: SIM115 - closed below
    demo = subprocess.Popen([sys.executable, "-m", "flowtracer", "demo", "--web-port", "0", "--resolver", "hash",
                             "--workload", str(tmp / "workload.yaml"), "--duration", str(RUN_S), "--warmup",
                             str(WARMUP_S), "--status-every", "30", "--run-dir", str(tmp / "run"), "--summary-json",
                             str(summary)], stdout=subprocess.PIPE, stderr=demo_err, text=True,
                            stdin=subprocess.DEVNULL)
    follow = None
    try:
        out = Lines(demo)
        wait_for(lambda: out.find(r"^Kafka: (\S+) ") is not None or demo.poll() is not None, 180,
                 "the demo's Kafka line")
        m = out.find(r"^Kafka: (\S+) ")
        assert m is not None, (demo.poll(), out.lines)
        path = [sys.executable, "-m", "flowtracer", "path", "--kafka", m.group(1), "--job", JOB, "--format", "json"]
        follow = subprocess.Popen([*path, "--follow"], stdout=subprocess.PIPE, stderr=follow_err, text=True)
        followed = Lines(follow)
        # The one-shot listing LIST_AT_S into the simulator's run (its window clock, as the records carry it).
        meta = tmp / "run" / "sim" / "ground-truth" / "meta.json"
        wait_for(lambda: (meta.exists() and meta.stat().st_size > 0) or demo.poll() is not None, 120,
                 "the simulator's ground-truth meta")
        start_ns = json.loads(meta.read_text())["start_ns"]
        # The simulator runs on the wall clock (its faults are scheduled on it): wait until it is LIST_AT_S in and
        # the follower has printed the job's current flows.
        wait_for(lambda: (time.time_ns() >= start_ns + LIST_AT_S * S and any(
            line.startswith("{") for _, line in list(followed.lines))) or demo.poll() is not None,
                 RUN_S + 120, f"the simulator {LIST_AT_S} s in and the follower's first lines")
        listed_at = time.time_ns()
        res = subprocess.run(path, capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == 0, res.stderr
        listing = json.loads(res.stdout)
        demo.wait(RUN_S + 120)
        assert demo.returncode == 0, (tmp / "demo.err").read_text()[-3000:]
    finally:
        if follow is not None:
            _stop(follow)
        _stop(demo)
        demo_err.close()
        follow_err.close()
    records = [(t, json.loads(line)) for t, line in followed.lines if line.startswith("{")]
    yield Run(json.loads(summary.read_text()), GroundTruth.load(tmp / "run" / "sim" / "ground-truth"), records,
              listing, listed_at, (tmp / "follow.err").read_text())


def _job_flows(gt: GroundTruth) -> dict[tuple[str, str, int], int]:
    """(src_ip, dst_ip, udp_src_port) -> ground-truth flow id, of the job's flows."""
    return {(f.src_ip, f.dst_ip, f.udp_src_port): fid for fid, f in gt.flows.items() if f.job == JOB}


def _truth(gt: GroundTruth, end_ns: int) -> dict[int, tuple[str, ...]]:
    """Flow id -> the path it took last in the window ending ``end_ns`` (a fault mid-window: the newer one)."""
    return {fw.flow.id: fw.paths[-1] for fw in gt.flows_in(end_ns - S, end_ns)}


def _crosses(path: tuple[str, ...] | list[str], port: str) -> bool:
    return any(lid.startswith(port + ">") or lid.endswith(">" + port) for lid in path)


def test_path_lists_every_flow_of_the_job_with_the_hops_of_ground_truth(run: Run) -> None:
    ids = _job_flows(run.gt)
    listed = {(d["src_ip"], d["dst_ip"], d["udp_src_port"]): d for d in run.listing}
    assert listed and all(d["job"] == JOB for d in run.listing), run.listing[:2]
    fault = run.gt.start_ns + LINK_DOWN_AT_S * S
    newest = max(d["window_end_ns"] for d in run.listing)
    assert newest < fault, "the listing was taken before the fault"
    # every flow of the job that sent in the newest window any listed record states is listed ...
    sending = {k for k, fid in ids.items() if fid in _truth(run.gt, newest)}
    assert len(sending) >= 32 and sending <= set(listed), sorted(sending - set(listed))
    # ... and each with the path, hop by hop, the flow took in the window its record states
    for k, d in listed.items():
        truth = _truth(run.gt, d["window_end_ns"]).get(ids[k])
        assert truth is not None and tuple(d["links"]) == truth, (d, truth)
        assert [(h["switch"], h["link"]) for h in d["hops"]] == \
            [(lid.split(":", 1)[0], lid) for lid in d["links"][1:]], d
        assert d["method"] == "hash" and d["src"].startswith(run.gt.flows[ids[k]].src_host + ":")


def test_a_link_taken_down_shows_as_path_changes_on_follow_in_the_window_after_it(run: Run) -> None:
    [ev] = run.gt.events_in(0, 2**62, "link_down")
    fault = ev["t_ns"]
    before = fault // S * S  # the last window that ended before the fault
    ids = _job_flows(run.gt)
    # The flows the downed leaf sent up the dead uplink: its own AFT withdraws the member (see the module docstring
    # for the flows coming down into it).
    sent_up = {fid for fid, path in _truth(run.gt, before).items()
               if fid in ids.values() and any(lid.startswith(DOWN + ">") for lid in path)}
    assert sent_up, "the downed uplink carried some of the job's flows"
    key_of = {fid: k for k, fid in ids.items()}
    latency = []
    for fid in sorted(sent_up):
        k = key_of[fid]
        changes = [(t, r) for t, r in run.follow if r["change"] == "path" and r["window_end_ns"] >= before
                   and (r["src_ip"], r["dst_ip"], r["udp_src_port"]) == k]
        assert changes, f"no path change printed for flow {k}"
        t, r = changes[0]
        # The change is published for the window the fault ends or the next one (the live ECMP groups of the leaf's
        # counters move the hash model; a fault on a tick boundary may show in that instant's sample or the next),
        # with the path the flow took from then on.
        assert r["window_end_ns"] <= before + S, (r["window_end_ns"] - fault) / S
        assert tuple(r["links"]) == _truth(run.gt, before + S)[fid] and not _crosses(r["links"], DOWN)
        latency.append((t - fault) / S)
    # Seconds from the fault to the line on the terminal: reported, not asserted (speed is no test's business).
    print(f"path change on --follow after the link went down: {min(latency):.2f}..{max(latency):.2f} s "
          f"over {len(latency)} flows")
    # A flow none of whose paths changed prints no change: --follow is changes, not every window.
    steady = {fid for fid, path in _truth(run.gt, before).items() if fid in ids.values() and not _crosses(path, DOWN)}
    assert steady and not [r for _, r in run.follow if r["change"] == "path"
                           and ids.get((r["src_ip"], r["dst_ip"], r["udp_src_port"])) in steady]


def test_the_summary_scores_every_flow_by_its_published_path(run: Run) -> None:
    f, p = run.summary["scores"]["flows"], run.summary["scores"]["paths"]
    assert f["windows_scored"] >= 20 and f["flows_scored"] >= 32, f
    assert f["flow_true_path_share"] <= p["path_overlap"], (f, p)  # the path-level figure bounds it from above
    # Every byte on its published path but those of the flows over the downed cable in the fault's window (a fault
    # on a tick boundary may be published a window early) and those the simulator moved without telling (the module
    # docstring's gap): the flows below the mark are such flows, nothing else.
    [ev] = run.gt.events_in(0, 2**62, "link_down")
    before = ev["t_ns"] // S * S
    crossing = {fid for fid, path in _truth(run.gt, before).items() if _crosses(path, DOWN)}
    key_of = {fid: (f_.src_nic, f_.udp_src_port) for fid, f_ in run.gt.flows.items()}
    assert {(w["src"], w["udp_src_port"]) for w in f["worst_flows"]} <= {key_of[fid] for fid in crossing}, \
        (f, crossing)
    assert f["flows_below"] <= len(crossing) and f["flow_true_path_share"] >= 0.95, f
