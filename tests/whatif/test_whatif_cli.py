"""``flowtracer whatif`` on an export file: table, JSON, plan CSV, figures and the HTML page, and bad input."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_whatif_strategies import FOUR, TOPOLOGY, B, S

from flowtracer.cmd_whatif import whatif
from flowtracer.schemas.v1 import flows_pb2
from flowtracer.whatif.record import Recording, write_export


def _batches(ends: list[int]) -> list[flows_pb2.FlowBatch]:
    out = []
    for end in ends:
        per_host: dict[str, list[flows_pb2.Flow]] = {}
        for f in FOUR:
            per_host.setdefault(f.src_nic.split(":")[0], []).append(flows_pb2.Flow(
                rdma_device="mlx5_0", port=1, lqpn=f.lqpn, rqpn=f.rqpn, src_ip=f.src_ip, dst_ip=f.dst_ip,
                udp_src_port=f.udp_src_port, udp_dst_port=4791, tx_bytes=f.bytes, qp_generation=1))
        for host, flows in per_host.items():
            out.append(flows_pb2.FlowBatch(schema_version=1, host=host, leaf="leaf1", window_start_ns=end - S,
                                           window_end_ns=end, flows=flows))
    return out


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    topo = tmp_path / "four.yaml"
    topo.write_text(TOPOLOGY)
    rec = tmp_path / "rec.jsonl"
    with rec.open("w") as fh:
        write_export(Recording(flow_batches=_batches([S, 2 * S, 3 * S]), source="test"), fh)
    return topo, rec


def invoke(*args: str):
    return CliRunner().invoke(whatif, list(args), catch_exceptions=False)


def test_table_of_every_strategy(files: tuple[Path, Path]) -> None:
    topo, rec = files
    r = invoke("--topology", str(topo), "--input", str(rec))
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "conditions: healthy"
    ecmp = next(line for line in lines if line.strip().startswith("ecmp "))
    assert re.search(r"ecmp\s+1\.000\s+1\.000\s+2\.000\s+leaf1:Ethernet3>spine1:Ethernet1\s+6\.00\s+1\.00x", ecmp)
    spray = next(line for line in lines if line.strip().startswith("spray "))
    assert re.search(r"spray\s+0\.000\s+0\.000\s+1\.000\s+\S+\s+3\.00\s+0\.50x", spray)
    assert "replayed 3 s of recording, 300.0 GB" in r.output


def test_json_with_a_degraded_link_and_a_time_range(files: tuple[Path, Path]) -> None:
    topo, rec = files
    r = invoke("--topology", str(topo), "--input", str(rec), "--json", "--degrade", "leaf1:Ethernet3=0.5",
               "-s", "ecmp", "-s", "spray-adaptive", "--from", "1970-01-01T00:00:01Z", "--to", "1970-01-01T00:00:03Z")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["version"] == 1 and doc["windows"] == 2
    assert [(x["conditions"], x["strategy"]) for x in doc["results"]] == [
        ("healthy", "ecmp"), ("healthy", "spray-adaptive"),
        ("leaf1:Ethernet3 at 0.5", "ecmp"), ("leaf1:Ethernet3 at 0.5", "spray-adaptive")]
    degraded_ecmp = doc["results"][2]
    assert degraded_ecmp["max_util"] == pytest.approx(4 * B * 8 / 200e9)
    assert doc["results"][3]["completion_s"] < degraded_ecmp["completion_s"]


def test_plan_csv_lists_the_new_ports(files: tuple[Path, Path], tmp_path: Path) -> None:
    topo, rec = files
    plan = tmp_path / "plan.csv"
    r = invoke("--topology", str(topo), "--input", str(rec), "-s", "sport-plan", "--plan", str(plan))
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(plan.read_text())))
    assert [(row["flow_id"], row["old"], row["new"], row["changed"]) for row in rows] == [
        (FOUR[0].flow_id, "50000", "50000", "False"), (FOUR[1].flow_id, "50002", "50003", "True"),
        (FOUR[2].flow_id, "50004", "50004", "False"), (FOUR[3].flow_id, "50006", "50007", "True")]
    assert rows[1]["flow_label"] == str(50003 & 0x3FFF)
    assert rows[1]["path"].split("|")[1] == "leaf1:Ethernet4>spine2:Ethernet1"


def test_figures_and_a_self_contained_page(files: tuple[Path, Path], tmp_path: Path) -> None:
    topo, rec = files
    out = tmp_path / "report"
    r = invoke("--topology", str(topo), "--input", str(rec), "-s", "ecmp", "-s", "spray", "--fail",
               "leaf1:Ethernet4", "--out", str(out))
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["completion.png", "fim.png", "links-0.png", "links-1.png", "report.html"]
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 4
    # Self-contained: nothing is fetched (SVG namespaces are identifiers, not requests).
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<script" not in page and "<link" not in page


@pytest.mark.parametrize(("args", "message"), [
    (["--input", "X"], "--topology is required"),
    (["--topology", "T", "--input", "X", "--kafka", "k:1"], "give exactly one of --kafka and --input"),
    (["--topology", "T", "--input", "X", "-s", "ecmp:n=2"], "unknown parameter 'n'"),
    (["--topology", "T", "--input", "X", "--fail", "leaf7:Ethernet1"], "no cable ends at 'leaf7:Ethernet1'"),
    (["--topology", "T", "--input", "BAD"], "BAD:2: not JSON"),
    (["--topology", "T", "--input", "X", "--from", "1970-01-01T00:00:10Z"], "no flow records in the range"),
])
def test_bad_input_is_one_line_and_exit_2(files: tuple[Path, Path], tmp_path: Path, args: list[str],
                                          message: str) -> None:
    topo, rec = files
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "flowtracer-recording", "version": 1}\n{nope\n')
    subst = {"T": str(topo), "X": str(rec), "BAD": str(bad)}
    r = CliRunner().invoke(whatif, [subst.get(a, a) for a in args])
    assert r.exit_code == 2, r.output
    assert message.replace("BAD", str(bad)) in r.output
    assert len(r.output.strip().splitlines()) == 1
