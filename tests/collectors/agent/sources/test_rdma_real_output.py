"""Golden tests over real iproute2 ``rdma`` output (tests/fixtures/real/rdma/, quoted in iproute2's own commit
messages; sources in its SOURCES.md), and the salvage of documents that are not valid JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowtracer.collectors.agent.sources.rdma_json import QpRecord, parse_res_qp, parse_stat_qp

REAL = Path(__file__).resolve().parents[3] / "fixtures" / "real" / "rdma"


def test_text_output_of_96f59e7f() -> None:
    p = parse_res_qp((REAL / "res_qp_text_96f59e7f.txt").read_bytes())
    assert (p.malformed, p.salvaged) == (0, 5)
    assert list(p.records) == [
        QpRecord("mlx5_0", 1, 0, None, "SMI", "RTS", None, 0, 0, "ib_core"),
        QpRecord("mlx5_0", 1, 1, None, "GSI", "RTS", None, 0, 0, "ib_core"),
        QpRecord("mlx5_0", 1, 7, None, "UD", "RTS", None, 0, 0, "ib_core"),
        QpRecord("mlx5_0", 1, 8, None, "UD", "RTS", None, 0, 0, "ib_ipoib"),
        QpRecord("mlx5_0", 1, 9, 0, "RC", "INIT", 0, 0, 548, "ibv_rc_pingpong"),
    ]


def test_text_output_of_8ecac46a_with_an_unbound_port() -> None:
    p = parse_res_qp((REAL / "res_qp_text_8ecac46a.txt").read_bytes())
    assert (p.malformed, p.salvaged) == (0, 4)
    assert p.records[0] == QpRecord("mlx5_4", 0, 8, None, "UD", "RESET", None, 0, 0, "ib_ipoib")
    assert [r.lqpn for r in p.records] == [8, 7, 1, 0]


def test_srq_entries_are_not_qps_and_are_counted() -> None:
    """`rdma res show srq -j`: valid JSON of another kind (no state, no sq-psn): two entries, both counted."""
    p = parse_res_qp((REAL / "res_srq_before_fix.json").read_bytes())
    assert (list(p.records), p.malformed, p.salvaged) == ([], 2, 0)


def test_elided_raw_output_loses_its_one_entry_counted() -> None:
    p = parse_res_qp((REAL / "res_qp_raw_elided.json").read_bytes())
    assert (list(p.records), p.malformed, p.salvaged) == ([], 1, 0)


# iproute2 before a903854b ("rdma: do not mix newline and json object", 6.8) with -j -dd: print_driver_table's
# newline_indent() closed the QP's object, then printed its "drv_*" pairs outside any object, and res_qp_line's
# newline() closed once more. Written here from that code path (no captured sample of it was found): each QP
# object is whole, what follows it is not JSON.
DD_BROKEN = ('[{"ifindex":1,"ifname":"mlx5_0","port":1,"lqpn":1,"type":"GSI","state":"RTS","sq-psn":0,'
             '"comm":"ib_core"},"drv_sq_wqe_cnt":128,"drv_rq_wqe_cnt":512},'
             '{"ifindex":1,"ifname":"mlx5_0","port":1,"lqpn":4711,"rqpn":4712,"type":"RC","state":"RTS",'
             '"rq-psn":77,"sq-psn":99,"path-mig-state":"MIGRATED","pdn":3,"pid":2048,"comm":"python3"},'
             '"drv_sq_wqe_cnt":256,"drv_rq_wqe_cnt":256}]\n')


def test_pre_68_dd_output_salvages_every_qp() -> None:
    with pytest.raises(ValueError):
        json.loads(DD_BROKEN)
    p = parse_res_qp(DD_BROKEN)
    assert (p.malformed, p.salvaged) == (0, 2)
    assert list(p.records) == [QpRecord("mlx5_0", 1, 1, None, "GSI", "RTS", None, 0, 0, "ib_core"),
                               QpRecord("mlx5_0", 1, 4711, 4712, "RC", "RTS", 77, 99, 2048, "python3")]


def test_a_document_cut_mid_entry_keeps_the_complete_ones(fixtures: Path) -> None:
    text = (fixtures / "rdma" / "res_qp.json").read_text()
    whole = parse_res_qp(text).records
    cut = text[: text.index('"lqpn":419')]  # inside the fourth entry
    p = parse_res_qp(cut)
    assert list(p.records) == list(whole)[:3] and (p.malformed, p.salvaged) == (1, 3)


def test_stat_output_is_salvaged_too(fixtures: Path) -> None:
    text = (fixtures / "rdma" / "stat_qp.json").read_text()
    whole = parse_stat_qp(text)
    p = parse_stat_qp(text.rstrip().rstrip("]"))  # the closing bracket lost
    assert [c.cntn for c in p.records] == [c.cntn for c in whole.records] and p.salvaged == len(whole.records)


def test_no_cut_of_any_sample_is_dropped_without_a_count(fixtures: Path) -> None:
    """Every prefix of every real and fixture document: records or a malformed count, never silence."""
    docs = [f.read_text() for f in sorted(REAL.iterdir()) if f.name != "SOURCES.md"]
    docs += [(fixtures / "rdma" / n).read_text() for n in ("res_qp.json", "stat_qp.json")] + [DD_BROKEN]
    for doc in docs:
        for end in range(1, len(doc), max(1, len(doc) // 97)):
            cut = doc[:end]
            if not cut.strip() or cut.strip() == "[]":
                continue
            for parse in (parse_res_qp, parse_stat_qp):
                p = parse(cut)
                assert len(p.records) + p.malformed >= 1, (cut[:60], parse.__name__)


def test_every_rdma_sample_is_cited() -> None:
    sources = (REAL / "SOURCES.md").read_text()
    assert all(f"`{f.name}`" in sources for f in REAL.iterdir() if f.name != "SOURCES.md")
