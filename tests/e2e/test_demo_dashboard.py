"""`flowtracer demo` with the live dashboard, driven in real headless Chromium (selenium + chromedriver).

One run (module fixture): the demo's default scenario for RUN_S seconds, writing to VictoriaMetrics
(``--influx-url``, token from the environment). While it runs, Chromium loads the dashboard and the
test records what a person would see; after the demo has stopped, the assertions compare that with
the store, the simulator's ground truth (through the demo's summary) and the process table. A
screenshot is saved under ``artifacts/`` (git-ignored) and pytest's tmp dir.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (the test fails, naming them, when
they are missing) and the ``selenium`` package (dev extra).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from congestion_truth import GT_CAUSE
from dashboard_flows import JOB, FlowView, check_flow_view, choose_job

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import load_topology
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.hosts.nccl_log import DTYPES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
RUN_S = 32
DEGRADE_AT_S = 12
"""The demo's cable is degraded this early (default 30 s) so that the run also shows its incident."""
SETTLE_S = 10  # at most this long (s) for the page to settle once results show; the demo runs RUN_S in all
KNOWN_COLLISIONS = {"leaf01:spine01|spine02", "leaf02:spine01|spine02"}
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1750")


READ_PAGE = """
const q = (sel) => Array.from(document.querySelectorAll(sel));
const fim = document.getElementById("fim-fabric-measured");
const dts = q("#health dt"), dds = q("#health dd");
return {
  title: document.title, fimText: fim.textContent, fim: fim.dataset.fim, fimEnd: fim.dataset.windowEndMs,
  collisions: q("#collisions tr.collision").map((r) => [r.dataset.group, r.dataset.link,
                                                         r.querySelector("td.flows").innerText, r.dataset.harm]),
  linksDrawn: q("#fabric line.link").length, linksColoured: q("#fabric line.link[data-util]").filter(
    (l) => l.getAttribute("data-util") !== "").length,
  switches: q("#fabric g.switch text").map((t) => t.textContent),
  collectives: q("#collectives tr.collective").map((r) => [r.dataset.job, r.dataset.op, r.dataset.bytes]),
  health: Object.fromEntries(dts.map((dt, i) => [dt.textContent, dds[i] ? dds[i].textContent : ""])),
  status: document.getElementById("status").textContent,
};
"""


@dataclass
class Seen:
    """What the page showed."""

    title: str = ""
    fim_text: str = ""
    fim: float | None = None
    fim_window_end_ms: int | None = None
    collisions: list[tuple[str, str, str, str]] = field(default_factory=list)  # group, link, flows text, harm
    links_drawn: int = 0
    links_coloured: int = 0
    switches: list[str] = field(default_factory=list)
    collectives: list[tuple[str, str, str]] = field(default_factory=list)  # job, operation, bytes per call
    health: dict[str, str] = field(default_factory=dict)
    status: str = ""
    flow_view: FlowView | None = None  # the flow view after choosing the ring's job (tests/dashboard_flows.py)
    screenshot: Path | None = None


@dataclass
class DemoRun:
    seen: Seen
    code: int
    stdout: str
    stderr: str
    summary: dict[str, Any]
    run_dir: Path
    port: int
    victoria: Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _need_browser() -> tuple[str, str]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("the dashboard test drives headless Chromium: install the Debian packages with "
                    "`apt-get install -y chromium chromium-driver` (make system-deps)", pytrace=False)
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.fail("the dashboard test needs selenium: pip install -e '.[dev]'", pytrace=False)
    return chromium, driver


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as r:
        return json.loads(r.read())


def _wait_for_results(proc: subprocess.Popen[bytes], base: str, timeout_s: float) -> dict[str, Any]:
    """Poll the dashboard's API until it has a measured fabric FIM and a collision, while the demo runs (its
    ``--duration`` counts from when its pipeline is up, which on a busy machine is well after it was launched);
    ``timeout_s`` only bounds a demo that never ends."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the demo exited with {proc.returncode} before the dashboard showed results")
        try:
            last = _get_json(base + "api/state")
            if last["fabric"]["measured"] and last["collisions"]:
                return last
        except (OSError, ValueError) as e:
            last = e
        time.sleep(0.5)
    pytest.fail(f"no measured fabric FIM and collision on the dashboard after {timeout_s} s; last: {last!r}")


def _settled(dom: dict[str, Any]) -> bool:
    """Whether the page shows what the tests check once it has had a few polls: every switch reporting and nearly
    every link measured and coloured."""
    return bool(dom["health"].get("switches reporting") == "6 / 6" and dom["linksColoured"] >= 40)


def _drive_browser(url: str, tmp: Path) -> Seen:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    chromium, chromedriver = _need_browser()
    opts = Options()
    opts.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=chromedriver,
                                                            log_output=str(tmp / "chromedriver.log")))
    seen = Seen()
    try:
        driver.set_page_load_timeout(20)
        driver.get(url)

        def ready(d: Any) -> bool:
            return bool(d.execute_script(
                "return !!document.getElementById('fim-fabric-measured').dataset.fim"
                " && document.querySelectorAll('#collisions tr.collision').length > 0"))

        WebDriverWait(driver, 20, poll_frequency=0.25).until(ready)
        # One script reads everything at once: the page redraws every second, so element handles go stale. Read
        # until the page has settled (every switch reporting, the links coloured), not for a fixed time: on a busy
        # machine a poll can take seconds. Bounded: past it the assertions say what the page showed.
        deadline = time.monotonic() + SETTLE_S
        dom = driver.execute_script(READ_PAGE)
        while not _settled(dom) and time.monotonic() < deadline:
            time.sleep(0.25)
            dom = driver.execute_script(READ_PAGE)
        seen.title = dom["title"]
        seen.fim_text, seen.fim, seen.fim_window_end_ms = dom["fimText"], float(dom["fim"]), int(dom["fimEnd"])
        seen.collisions = [tuple(c) for c in dom["collisions"]]
        seen.links_drawn, seen.links_coloured = dom["linksDrawn"], dom["linksColoured"]
        seen.switches, seen.health, seen.status = dom["switches"], dom["health"], dom["status"]
        seen.collectives = [tuple(c) for c in dom["collectives"]]
        seen.flow_view = choose_job(driver, JOB)  # issue 36: as a person would, before the screenshot
        shot = tmp / "dashboard.png"
        driver.save_screenshot(str(shot))
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(shot, ARTIFACTS / "test_demo_dashboard.png")
        seen.screenshot = shot
    finally:
        driver.quit()
    return seen


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, victoria: Any) -> Iterator[DemoRun]:
    _need_browser()
    tmp = tmp_path_factory.mktemp("demo-dashboard")
    port = _free_port()
    run_dir = tmp / "run"
    summary = tmp / "summary.json"
    env = {**os.environ, "INFLUX_TOKEN": "demo-test-not-a-secret"}
    cmd = [sys.executable, "-m", "flowtracer", "demo", "--duration", str(RUN_S), "--web-port", str(port),
           "--influx-url", victoria.url, "--run-dir", str(run_dir), "--summary-json", str(summary),
           "--degrade-at", str(DEGRADE_AT_S)]
    out, err = open(tmp / "demo.out", "wb"), open(tmp / "demo.err", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=tmp)
    try:
        base = f"http://127.0.0.1:{port}/dashboard/"
        _wait_for_results(proc, base, RUN_S + 120)
        seen = _drive_browser(base, tmp)
        code = proc.wait(RUN_S + 60)
    finally:
        if proc.poll() is None:  # only on a failure above: stop the demo as Ctrl-C would
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        out.close()
        err.close()
    yield DemoRun(seen, code, (tmp / "demo.out").read_text(), (tmp / "demo.err").read_text(),
                  json.loads(summary.read_text()) if summary.exists() else {}, run_dir, port, victoria)


def test_dashboard_renders_the_fabric_charts_and_health(demo: DemoRun) -> None:
    s = demo.seen
    assert s.title == "flowtracer: live fabric"
    assert sorted(s.switches) == ["leaf01", "leaf02", "leaf03", "leaf04", "spine01", "spine02"]
    # 16 host cables + 8 leaf-spine cables, each drawn as its two directions; nearly all measured and coloured.
    assert s.links_drawn == 48
    assert s.links_coloured >= 40, s.links_coloured
    assert s.health["switches reporting"] == "6 / 6"
    assert s.health["dead letters"] == "0"
    # Every clock is the machine's: however late a busy machine delivers, that is delay (shown apart), never a
    # clock off.
    assert "clocks off" not in s.health, s.health
    assert re.fullmatch(r"(switch|host) \S+ \d+\.\d\d s", s.health["slowest delivery"]), s.health
    assert s.health["slowest transit"].endswith(" s"), s.health
    assert s.status.startswith("live"), s.status
    assert s.screenshot is not None and s.screenshot.stat().st_size > 20_000


def test_choosing_a_job_highlights_the_paths_of_its_flows(demo: DemoRun) -> None:
    """Issue 36: the job's flows listed with their hops, exactly their links highlighted, each flow on the path the
    simulator forwarded it over (the degraded cable moves no flow); the summary scores every flow right."""
    assert demo.seen.flow_view is not None
    check_flow_view(demo.seen.flow_view, GroundTruth.load(demo.run_dir / "sim" / "ground-truth"), JOB, min_flows=30)
    assert demo.summary["scores"]["flows"]["flow_true_path_share"] == 1.0, demo.summary["scores"]["flows"]


def test_dashboard_fim_matches_the_store(demo: DemoRun) -> None:
    s = demo.seen
    assert s.fim is not None and s.fim_window_end_ms is not None
    assert s.fim_text == f"{s.fim:.3f}"
    stored = {}
    for series in demo.victoria.export('fim_fim{group="fabric",basis="measured"}'):
        stored.update(zip(series["timestamps"], series["values"], strict=True))
    assert s.fim_window_end_ms in stored, (s.fim_window_end_ms, sorted(stored)[-5:])
    assert stored[s.fim_window_end_ms] == pytest.approx(s.fim, abs=1e-9)


def test_dashboard_shows_the_known_collision_with_its_flows(demo: DemoRun) -> None:
    groups = {g for g, _, _, _ in demo.seen.collisions}
    assert groups == KNOWN_COLLISIONS
    for group, link, flows, _ in demo.seen.collisions:
        assert link.startswith(group.split(":")[0] + ":")
        assert flows.count("sport") >= 2 and "AllReduce" in flows, flows


def test_demo_summary_reports_the_collision_and_a_fim_consistent_with_ground_truth(demo: DemoRun) -> None:
    assert demo.code == 0, demo.stderr[-3000:]
    s = demo.summary
    assert s["stopped_by"] == "duration"
    assert {c["group"] for c in s["collisions"]} == KNOWN_COLLISIONS
    for c in s["collisions"]:  # the ring's channels, and on leaf01 the workload's steady flow (in no job: "")
        assert {f["job_ground_truth"] for f in c["flows"]} <= {"ring-allreduce", ""}
        assert "ring-allreduce" in {f["job_ground_truth"] for f in c["flows"]}
        # ... and the pipeline names the same jobs: the agents read them from the hosts' proc/<pid>/cgroup
        assert [f["job_id"] for f in c["flows"]] == [f["job_ground_truth"] for f in c["flows"]], c["flows"]
    vs = s["fabric_fim"]["vs_ground_truth"]
    assert vs["windows_compared"] >= 8 and vs["consistent"], vs
    assert s["sink"] == {"kind": "influxdb", "url": demo.victoria.url, "org": "flowtracer", "bucket": "flowtracer"}
    assert all(st["exit_code"] in (0, None) for st in s["stages"]), s["stages"]
    assert "every process stopped" in demo.stdout


def _stored(victoria: Any, match: str, label: str) -> dict[str, dict[int, float]]:
    """label value -> window end (ns) -> value of the series matching ``match``."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for series in victoria.export(match):
        out[series["metric"][label]].update((t * 1_000_000, v) for t, v in zip(series["timestamps"], series["values"],
                                                                                 strict=True))
    return out


def _congested(port: dict[str, int] | None) -> bool:
    """A port of the ground truth marked, dropped or was paused (priority 3) in the window."""
    return port is not None and any(port[k] > 0 for k in ("ecn-marked-pkts", "dropped-pkts", "pfc-rx-pause-frames"))


def test_the_known_collision_congests_its_uplink_not_the_sibling_and_is_reported_harmful(demo: DemoRun) -> None:
    """Against the simulator's congestion ground truth (RUN_DIR/sim/congestion.jsonl), window by window: the ECN
    marks on the collided uplink and the CNPs of its flows' receivers are the simulator's, exactly; the idle sibling
    has none; every collision the processor judged is harmful exactly when the truth marked its member and not its
    sibling (marked, dropped or paused): leaf01's (two NICs on one uplink) is, leaf02's (one NIC at its line rate)
    is not."""
    gt = GroundTruth.load(demo.run_dir / "sim" / "ground-truth")
    hop = gt.tick_ns
    fabric = Fabric(load_topology(demo.run_dir / "sim" / "topology.yaml"))
    sibling = {m.id: next(o.id for o in g.members if o.id != m.id)
               for g in fabric.ecmp_groups.values() if len(g.members) == 2 for m in g.members}
    collided = {port for rec in gt.congestion for port, c in rec["causes"].items() if c["cause"] == "collision"}
    assert len(collided) == 1, collided  # the demo's known collision, and nothing else collides harmfully
    [port] = collided
    up = next(lk for lk in sibling if lk.startswith(port + ">"))
    idle = sibling[up]
    ecn = _stored(demo.victoria, "link_congestion_ecn_marked_pkts_roce", "link")
    cnp = _stored(demo.victoria, "nic_congestion_cnp_sent", "nic")
    harmful = _stored(demo.victoria, 'collision_harmful{resolver="hash"}', "link")
    assert len(ecn[up]) >= 10 and len(ecn[idle]) >= 10, (len(ecn[up]), len(ecn[idle]))
    receivers: set[str] = set()
    for end, marks in ecn[up].items():
        truth = gt.congestion_in(end - hop, end)
        assert marks == truth.ports.get(port, {}).get("ecn-marked-pkts", 0), end
        assert ecn[idle][end] == 0 and truth.ports.get(idle.split(">")[0], {}).get("ecn-marked-pkts", 0) == 0
        on_up = {fw.flow.dst_nic for fw in gt.flows_in(end - hop, end)
                 if fw.flow.direction == "data" and fw.bytes and any(up in path for path in fw.paths)}
        receivers |= on_up
        for nic in on_up:
            if end in cnp[nic]:
                assert cnp[nic][end] == truth.nics[nic]["np_cnp_sent"], (nic, end)
    assert sum(ecn[up].values()) > 0 and len(receivers) == 2  # two NICs' flows, both receivers sent CNPs
    assert all(sum(cnp[nic].values()) > 0 for nic in receivers), receivers
    # Harm, window by window, against the truth (after the first windows, when the congestion counters'
    # source is not yet known to the processor): harmful exactly when the member was congested and its sibling not.
    assert {lk.split(":")[0] for lk in harmful} == {g.split(":")[0] for g in KNOWN_COLLISIONS}
    verdicts = {True: 0, False: 0}
    for link, by_end in harmful.items():
        member, sib = link.split(">")[0], sibling[link].split(">")[0]
        for end, value in sorted(by_end.items())[3:]:
            truth = gt.congestion_in(end - hop, end).ports
            expected = _congested(truth.get(member)) and not _congested(truth.get(sib))
            assert bool(value) == expected, (link, end, value, truth.get(member), truth.get(sib))
            verdicts[expected] += 1
    assert verdicts[True] >= 8 and verdicts[False] >= 8, verdicts
    # ... and the dashboard showed it so: the collided uplink's row harmful, the other not.
    assert {link: harm for _, link, _, harm in demo.seen.collisions} == \
        {lk: str(lk == up).lower() for lk in harmful}, demo.seen.collisions


def test_demo_reports_the_degraded_cable_as_an_incident_with_the_ring_job_affected(demo: DemoRun) -> None:
    """Issue #19's done-when, in window time (s after the simulator's start; the pipeline's wall-clock lag on a
    busy machine comes on top, see the summary's latency): the cable is the top suspect of a degraded_link
    incident reported within 10 s of the fault, the ring job is affected, and before the fault nothing but the
    known collision's persistent imbalance is reported."""
    s = demo.summary
    [fault] = s["faults"]
    assert (fault["kind"], fault["target"]) == ("degrade", "leaf03:Ethernet5"), fault
    degraded = [i for i in s["incidents"] if i["kind"] == "degraded_link"]
    assert len(degraded) == 1, s["incidents"]
    [inc] = degraded
    assert inc["suspects"][0]["component"] == "cable:leaf03:Ethernet5~spine01:Ethernet3", inc
    assert fault["at_s"] <= inc["start_s"] and inc["detected_s"] <= fault["at_s"] + 10, (fault, inc)
    assert inc["jobs_ground_truth"] == ["ring-allreduce"], inc
    # ... and the pipeline names it from its own data: the agents read each flow's job from its process's cgroup
    assert inc["jobs"] == inc["jobs_ground_truth"], inc
    # Everything else is the demo's known conditions: each collision's group as a persistent imbalance, and the
    # uplink the ground truth says congests by collision (the harmful one) as a congestion hot spot.
    gt = GroundTruth.load(demo.run_dir / "sim" / "ground-truth")
    collided = {port for rec in gt.congestion for port, c in rec["causes"].items() if c["cause"] == "collision"}
    others = {(i["kind"], i["suspects"][0]["component"]) for i in s["incidents"] if i is not inc}
    known = {("persistent_imbalance", f"group:{g}") for g in KNOWN_COLLISIONS}
    assert {(k, c) for k, c in others if k != "congestion_hotspot"} <= known, others
    assert {c.removeprefix("port:").split(">")[0] for k, c in others if k == "congestion_hotspot"} <= collided, others
    assert "incident degraded_link" in demo.stdout
    # published to flowtracer.incidents.v1 and read back by the demo's own consumer
    assert s["incident_records_published"] > 0 and s["pipeline"]["incidents_read_back"] >= 1, s["pipeline"]
    # ... and written to the store as the incident measurement, tagged with its kind and top suspect
    stored = demo.victoria.export('incident_open{kind="degraded_link"}')
    assert [x["metric"]["top_suspect"] for x in stored] == [inc["suspects"][0]["component"]], stored


#: Windows before the processor can judge a congested link: the first ones (congestion counters' baseline
#: samples, as in the harm test) ...
WARMUP_WINDOWS = 3
#: ... and, for a degraded link, its first congested window: the rule wants a plateau over two windows running.
DEGRADED_WARMUP = 1


def test_congestion_causes_match_the_ground_truth_window_by_window(demo: DemoRun) -> None:
    """The processor's congestion_cause records, as stored, against the simulator's causes (RUN_DIR/sim's
    congestion.jsonl) window by window: every port the ground truth names a collision or a degraded link gets
    that cause on its link from the processor (the degraded one from its second congested window after the
    fault on, as the rule needs two), and the processor names these two causes nowhere else."""
    gt = GroundTruth.load(demo.run_dir / "sim" / "ground-truth")
    hop = gt.tick_ns
    stored: dict[str, dict[int, str]] = defaultdict(dict)  # link -> window end (ns) -> cause
    for series in demo.victoria.export("congestion_cause_pfc_pauses_received"):
        link, cause = series["metric"]["link"], series["metric"]["cause"]
        for t in series["timestamps"]:
            assert stored[link].setdefault(t * 1_000_000, cause) == cause, (link, t)  # one cause per window
    ends = sorted({end for by_end in stored.values() for end in by_end})
    assert len(ends) >= 10, ends
    expected: dict[str, dict[int, str]] = defaultdict(dict)  # ground truth: switch port -> window end -> cause
    for end in ends[WARMUP_WINDOWS:]:
        for port, t in gt.congestion_in(end - hop, end).causes.items():
            expected[port][end] = GT_CAUSE[t["cause"]]
    checked = {"collision": 0, "degraded_link": 0}
    for port, by_end in sorted(expected.items()):
        [link] = [lk for lk in stored if lk.startswith(port + ">")] or [f"{port}>(no record)"]
        named = sorted(end for end, cause in by_end.items() if cause in checked)
        for k, end in enumerate(named):
            cause = by_end[end]
            if cause == "degraded_link" and (k < DEGRADED_WARMUP or end - hop not in by_end):
                assert stored[link].get(end) in (cause, "unknown", None), (link, end, stored[link].get(end))
                continue
            assert stored[link].get(end) == cause, (link, end, cause, stored[link].get(end))
            checked[cause] += 1
    # Never a collision or a degraded link the ground truth does not name, on any link (sibling, reverse direction).
    for link, by_end in stored.items():
        for end, cause in by_end.items():
            if cause in checked and end >= ends[WARMUP_WINDOWS]:
                assert expected.get(link.split(">")[0], {}).get(end) == cause, (link, end, cause)
    # The collision all along, the degraded cable in most windows after the fault (at DEGRADE_AT_S of RUN_S).
    assert checked["collision"] >= 10 and checked["degraded_link"] >= 8, checked


def test_demo_leaves_nothing_running(demo: DemoRun) -> None:
    left = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmdline = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(demo.run_dir) in cmdline:
                left.append(cmdline)
    assert not left
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", demo.port)) != 0, "the dashboard port still accepts connections"


#: The simulator's NCCL log lines, read here on their own (not with the agent's parser): a COLL line, and the init
#: line that gives a comm pointer its commId.
COLL_LINE = re.compile(r"^\[([\d-]+ [\d:.]+)\] \S+?:(\d+):\d+ \[\d+\] NCCL INFO (\w+): opCount [0-9a-f]+ sendbuff \S+ "
                       r"recvbuff \S+ count (\d+) datatype (\d+) op \d+ root -?\d+ comm (0x[0-9a-f]+) \[nranks=\d+\]")
INIT_LINE = re.compile(r"NCCL INFO ncclCommInitRank comm (0x[0-9a-f]+) rank \d+ nranks \d+ .* commId (0x[0-9a-f]+) - Init START")
#: (host, commId, operation, datatype, count)
CollKey = tuple[str, str, str, int, int]


def _logged_calls(hosts_dir: Path) -> dict[CollKey, dict[int, list[int]]]:
    """Every COLL line of the simulated hosts' NCCL logs: key -> logging pid -> the lines' timestamps (ns)."""
    out: dict[CollKey, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for log in sorted(hosts_dir.glob("*/nccl.log")):
        host, comm_ids = log.parent.name, {}
        for line in log.read_text().splitlines():
            if (m := INIT_LINE.search(line)) is not None:
                comm_ids[m.group(1)] = m.group(2)
            elif (m := COLL_LINE.match(line)) is not None:
                t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
                key = (host, comm_ids[m.group(6)], m.group(3), int(m.group(5)), int(m.group(4)))
                out[key][int(m.group(2))].append(int(t.timestamp()) * 10**9 + t.microsecond * 1000)
    return out


def _profile_series(victoria: Any, field_name: str) -> dict[CollKey, dict[int, float]]:
    """The stored collective_profile ``field_name`` per (host, comm, operation, datatype, count): window end (ns) ->
    value; every series must be the ring job's."""
    out: dict[CollKey, dict[int, float]] = defaultdict(dict)
    for series in victoria.export(f"collective_profile_{field_name}"):
        m = series["metric"]
        assert m["job"] == "ring-allreduce", m  # the demo's only NCCL job, named by its processes' cgroups
        key = (m["host"], m["comm"], m["operation"], int(m["datatype"]), int(m["count"]))
        out[key].update((t * 1_000_000, v) for t, v in zip(series["timestamps"], series["values"], strict=True))
    return out


def test_collective_profiles_equal_the_simulators_nccl_logs_and_the_degraded_link_names_the_slowed_ones(
        demo: DemoRun) -> None:
    """Issue #21's done-when: the ring job's collective profile as stored (operations, sizes, call counts per host
    and communicator) equals what the simulator's NCCL logs describe, up to the last call the store covers; the
    degraded link's incident names the ring job's collectives, and their estimated bus bandwidth drops after the
    fault."""
    logged = _logged_calls(demo.run_dir / "sim" / "hosts")
    calls = _profile_series(demo.victoria, "calls")
    last = _profile_series(demo.victoria, "last_call_ns")
    size = _profile_series(demo.victoria, "call_bytes")
    width = {enum: w for enum, w in DTYPES.values()}
    assert len(logged) == 15 and set(calls) == set(logged)  # the ring's 15 hosts, one rank each
    gt = GroundTruth.load(demo.run_dir / "sim" / "ground-truth")
    ring_comms = {f.comm_id for f in gt.flows.values() if f.job == "ring-allreduce"}
    for key, by_pid in logged.items():
        _, comm, op, dtype, count = key
        assert comm in ring_comms and op == "AllReduce", key  # the demo's ring job (other operations: unit tests)
        # The store holds the agent's windows up to this call. It keeps values as float64 (a 256 ns step at
        # today's epoch), so the stored stamp may round below the logged one: allow one step, far below the
        # milliseconds between two calls.
        cutoff = max(last[key].values()) + math.ulp(max(last[key].values()))
        want = max(sum(t <= cutoff for t in ts) for ts in by_pid.values())
        assert sum(calls[key].values()) == want > 10, (key, want)
        assert set(size[key].values()) == {count * width[dtype]}, key  # AllReduce: count x element size
    # The dashboard showed them per job: the ring's AllReduce of the logged size.
    sizes = {str(count * width[dtype]) for _, _, _, dtype, count in logged}
    assert {(job, op) for job, op, _ in demo.seen.collectives} == {("ring-allreduce", "AllReduce")}, demo.seen
    assert {b for _, _, b in demo.seen.collectives} == sizes, demo.seen.collectives
    # The incident names the ring job's collectives, as the logs name them ...
    [inc] = [i for i in demo.summary["incidents"] if i["kind"] == "degraded_link"]
    assert inc["collectives"] == sorted({f"ring-allreduce/{c}/{op}" for _, c, op, _, _ in logged}), inc
    # ... and they did slow down: the median estimated bus bandwidth of the ring's windows drops after the fault.
    [fault] = demo.summary["faults"]
    fault_ns = gt.start_ns + round(fault["at_s"] * 10**9)
    bus = _profile_series(demo.victoria, "bus_bw_bytes_per_s")
    before = [v for by_end in bus.values() for end, v in by_end.items() if end <= fault_ns]
    after = [v for by_end in bus.values() for end, v in by_end.items() if end >= fault_ns + 2 * 10**9]
    assert len(before) >= 5 * 15 and len(after) >= 5 * 15, (len(before), len(after))
    assert statistics.median(after) < 0.95 * statistics.median(before), (statistics.median(before),
                                                                         statistics.median(after))
