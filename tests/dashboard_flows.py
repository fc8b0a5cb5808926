"""The dashboard's flow view driven in a real browser (issue 36): choose a job as a person would, read the rows and
the highlighted links, and check them against the simulator's ground truth (tests/e2e/test_demo_dashboard.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowtracer.sim.fabric.ground_truth import GroundTruth

JOB = "ring-allreduce"
"""The demo workload's job (the ring), chosen in the flow view."""
READ_FLOWS = """
const q = (sel) => Array.from(document.querySelectorAll(sel));
return {rows: q("#flows tr.flow").map((r) => [r.dataset.flow, r.dataset.links.split(" ")]),
        highlighted: q("#fabric line.link.path").map((l) => l.dataset.link).sort()};
"""


@dataclass
class FlowView:
    """What the flow view showed: the jobs offered, the rows (flow id, its links) and the links highlighted."""

    options: list[str]
    rows: list[tuple[str, list[str]]]
    highlighted: list[str]


def choose_job(driver: Any, job: str) -> FlowView:
    """Pick ``job`` in the flow view's select once it is offered; wait until its rows and highlight show."""
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 20, poll_frequency=0.25).until(lambda d: d.execute_script(
        f"return Array.from(document.querySelectorAll('#flow-job option')).some((o) => o.value === '{job}')"))
    select = Select(driver.find_element("id", "flow-job"))
    options = [o.get_attribute("value") for o in select.options]
    select.select_by_value(job)
    WebDriverWait(driver, 20, poll_frequency=0.25).until(lambda d: d.execute_script(
        "return document.querySelectorAll('#flows tr.flow').length > 0"
        " && document.querySelectorAll('#fabric line.link.path').length > 0"))
    flows = driver.execute_script(READ_FLOWS)
    return FlowView(options, [(f, links) for f, links in flows["rows"]], flows["highlighted"])


def check_flow_view(view: FlowView, gt: GroundTruth, job: str, min_flows: int) -> None:
    """The job was offered, at least ``min_flows`` of its flows listed, exactly their links highlighted, and each
    flow's links the one path the simulator forwarded it over during the whole run."""
    assert job in view.options, view.options
    assert len(view.rows) >= min_flows, view.rows
    assert view.highlighted == sorted({lid for _, links in view.rows for lid in links})
    by_qp = {(f.src_nic, f.src_qpn): fid for fid, f in gt.flows.items()}
    truth = {fid: set(paths) for fid, paths in gt.path_bytes(gt.start_ns, gt.tick_ends[-1]).items()}
    for flow_id, links in view.rows:
        nic, lqpn, _ = flow_id.split("/")  # "<src_nic>/<lqpn>/<qp_generation>"
        fid = by_qp[(nic, int(lqpn))]
        assert gt.flows[fid].job == job and truth[fid] == {tuple(links)}, (flow_id, links, truth.get(fid))
