"""The line-protocol encoders (pure, no servers): every line matches MEASUREMENTS exactly (tag set,
field set, field types), timestamps are window ends, escaping round-trips, "absent, not zero"
holds, and bad messages get an error that names them.

Lines are checked with a small independent line-protocol parser (``parse_line``) that follows the
InfluxDB 2 rules, so the encoder is not checked against itself. That VictoriaMetrics reads them
the same way is tested in test_sinks.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from flowtracer.schemas.v1 import analytics_pb2 as a
from flowtracer.schemas.v1 import common_pb2 as c
from flowtracer.schemas.v1 import flows_pb2
from flowtracer.stream.sinks import line_protocol as ip
from flowtracer.stream.sinks.line_protocol import PointError
from flowtracer.stream.stages.outputs import MEASUREMENTS, to_lines

T_END = 1_704_067_210_000_000_000  # 2024-01-01T00:00:10Z
T_START = T_END - 10_000_000_000


# -- an independent line-protocol parser --------------------------------------------------------------

def _read_key(s: str, i: int, stops: str) -> tuple[str, int]:
    """Read up to an unescaped char in *stops*; a backslash escapes any of ``, =\\`` (InfluxDB 2),
    before anything else it is literal."""
    out = []
    while i < len(s) and s[i] not in stops:
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in ", =\\":
            out.append(s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out), i


def parse_line(line: str) -> tuple[str, dict[str, str], dict[str, tuple[str, Any]], int]:
    """(measurement, tags, fields as name -> (type, value), timestamp) of one line."""
    assert "\n" not in line and "\r" not in line
    name, i = _read_key(line, 0, ", ")
    tags: dict[str, str] = {}
    while line[i] == ",":
        k, i = _read_key(line, i + 1, "=")
        v, i = _read_key(line, i + 1, ", ")
        assert k not in tags and v, line
        tags[k] = v
    assert line[i] == " "
    fields: dict[str, tuple[str, Any]] = {}
    while True:
        k, i = _read_key(line, i + 1, "=")
        i += 1
        if line[i] == '"':
            out, i = [], i + 1
            while line[i] != '"':
                if line[i] == "\\" and line[i + 1] in '"\\':
                    i += 1
                out.append(line[i])
                i += 1
            fields[k] = ("string", "".join(out))
            i += 1
        else:
            j = i
            while line[i] not in ", ":
                i += 1
            raw = line[j:i]
            if raw.endswith("i"):
                fields[k] = ("int", int(raw[:-1]))
            else:
                assert "." in raw or "e" in raw, f"float {k}={raw} is written like an integer"
                fields[k] = ("float", float(raw))
        if line[i] == " ":
            break
    return name, tags, fields, int(line[i + 1:])


def check_against_schema(line: str) -> tuple[dict[str, str], dict[str, Any], int]:
    """Parse *line* and assert it is exactly what MEASUREMENTS defines; returns tags, field values, ts."""
    name, tags, fields, ts = parse_line(line)
    m = MEASUREMENTS[name]
    assert set(m.tags) - set(m.optional) <= set(tags) <= set(m.tags), line
    assert set(m.fields) - set(m.optional) <= set(fields) <= set(m.fields), line
    for k, (kind, _) in fields.items():
        assert kind == m.fields[k], f"{name}.{k} written as {kind}, defined as {m.fields[k]}"
    return tags, {k: v for k, (_, v) in fields.items()}, ts


# -- messages ------------------------------------------------------------------------------------------

LINK = "leaf-01:Ethernet1/1>spine-01:Ethernet1/1"


def _set(msg: Any, changes: dict[str, Any]) -> Any:
    """*msg* with fields replaced (repeated fields by a list)."""
    for k, v in changes.items():
        if isinstance(v, list):
            del getattr(msg, k)[:]
            getattr(msg, k).extend(v)
        else:
            setattr(msg, k, v)
    return msg


def link_load(**kw: Any) -> a.LinkLoad:
    msg = a.LinkLoad(
        schema_version=1, window_start_ns=T_START, window_end_ns=T_END, link=LINK, src_node="leaf-01",
        src_port="Ethernet1/1", dst_node="spine-01", dst_port="Ethernet1/1", speed_bps=400_000_000_000,
        measured_bytes=125_000_000_000, measured_valid=True, attributed_bytes=120_000_000_000,
        unexplained_bytes=5_000_000_000, utilization=0.25, flow_count=3, resolver="hash",
        groups=["leaf-01:spine-01|spine-02"],
    )
    return _set(msg, kw)


def path_load(**kw: Any) -> a.PathLoad:
    links = ["h01:mlx5_0>leaf-01:Ethernet1/9", LINK, "spine-01:Ethernet1/3>leaf-03:Ethernet1/1",
             "leaf-03:Ethernet1/9>h09:mlx5_0"]
    msg = a.PathLoad(
        schema_version=1, window_start_ns=T_START, window_end_ns=T_END, path_id="|".join(links), links=links,
        src_host="h01", src_nic="h01:mlx5_0", dst_host="h09", dst_nic="h09:mlx5_0", bytes=9_000_000_000,
        flow_count=2, resolver="infer", confidence=0.875,
    )
    return _set(msg, kw)


def fim(**kw: Any) -> a.FimSample:
    msg = a.FimSample(
        schema_version=1, window_start_ns=T_START, window_end_ns=T_END, group="leaf-01:spine-01|spine-02",
        switch="leaf-01", basis=a.LOAD_BASIS_ATTRIBUTED, members=2, fim=0.5, fim_flows=0.0,
        max_mean_ratio=1.5, cv=0.5, total_bytes=200, member_links=["x", "y"], member_bytes=[150, 50],
    )
    return _set(msg, kw)


def flow(src: str, dst: str, sport: int, nbytes: int, job: str = "", coll: str = "") -> c.FlowRef:
    key = c.FlowKey(src_ip=src, dst_ip=dst, ip_proto=17, udp_src_port=sport, udp_dst_port=4791, dst_qpn=7)
    return c.FlowRef(key=key, src_host="h01", dst_host="h09", lqpn=9, job_id=job, collective=coll, bytes=nbytes)


def collision(**kw: Any) -> a.Collision:
    msg = a.Collision(
        schema_version=1, window_start_ns=T_START, window_end_ns=T_END, switch="leaf-01",
        group="leaf-01:spine-01|spine-02", link=LINK, link_utilization=0.96,
        idle_link="leaf-01:Ethernet1/2>spine-02:Ethernet1/1", idle_utilization=0.0,
        flows=[flow("10.0.0.1", "10.0.3.1", 52208, 1_200_000_000, "j42", "AllReduce"),
               flow("10.0.0.2", "10.0.3.2", 49152, 800_000_000)],
        resolver="hash",
    )
    return _set(msg, kw)


def link_congestion(**kw: Any) -> a.LinkCongestion:
    msg = a.LinkCongestion(
        schema_version=1, window_start_ns=T_START, window_end_ns=T_END, link=LINK, src_node="leaf-01",
        src_port="Ethernet1/1", dst_node="spine-01", dst_port="Ethernet1/1", pfc_pauses_received=45,
        pfc_pauses_received_roce=40, pfc_pauses_sent=2, pfc_pauses_sent_roce=2, pfc_valid=True, ecn_marked_pkts=101,
        ecn_marked_pkts_roce=100, ecn_valid=True, drops_valid=False, queue_watermark_bytes=9000,
        queue_watermark_bytes_roce=5000, watermark_valid=True,
    )
    return _set(msg, kw)


def nic_congestion(**kw: Any) -> a.NicCongestionSample:
    msg = a.NicCongestionSample(
        schema_version=1, window_start_ns=T_START, window_end_ns=T_END, nic="h01:mlx5_0", host="h01",
        leaf="leaf-01", port=1, netdev="ens1f0np0", ecn_marked_received=7, cnp_sent=7, cnp_handled=0, cnp_ignored=0,
        cnp_valid=True, out_of_sequence=1, retransmit_valid=True, pfc_valid=False,
    )
    return _set(msg, kw)


def collective_profile(**kw: Any) -> flows_pb2.CollectiveProfile:
    msg = flows_pb2.CollectiveProfile(
        schema_version=1, window_start_ns=T_START, window_end_ns=T_END, host="h01", job_id="j42", comm_id="0xabc",
        operation="AllReduce", datatype=7, datatype_bytes=4, count=262144, call_bytes=1048576, calls=3, nranks=16,
        ranks=[0, 1], first_call_ns=T_START + 5, last_call_ns=T_START + 9, timed_calls=4, timed_ns=2_000_000,
        algo_bw_bytes_per_s=2097152000.0, bus_bw_bytes_per_s=3932160000.0,
    )
    return _set(msg, kw)


# -- tests ---------------------------------------------------------------------------------------------

def test_link_load_line_is_exact() -> None:
    """Tags sorted by key, ints with i, floats with a decimal point, timestamp = window end (ns)."""
    assert ip.link_load_line(link_load(utilization=0.0)) == (
        "link_load,dst_node=spine-01,link=leaf-01:Ethernet1/1>spine-01:Ethernet1/1,resolver=hash,src_node=leaf-01 "
        "measured_bytes=125000000000i,attributed_bytes=120000000000i,unexplained_bytes=5000000000i,"
        "utilization=0.0,flow_count=3i,measured_valid=1i 1704067210000000000"
    )


@pytest.mark.parametrize("msg", [link_load(), path_load(), fim(), collision(),
                                 link_load(measured_valid=False), fim(basis=a.LOAD_BASIS_MEASURED),
                                 fim(group="fabric", switch=""), collision(flows=[]), link_congestion(),
                                 link_congestion(pfc_valid=False, ecn_valid=False, watermark_valid=False),
                                 nic_congestion(), collective_profile()],
                         ids=["link", "path", "fim", "collision", "link-invalid", "fim-measured", "fim-fabric",
                              "collision-noflows", "link-congestion", "link-congestion-unknown", "nic-congestion",
                              "collective-profile"])
def test_every_line_matches_the_schema(msg: Any) -> None:
    _, _, ts = check_against_schema(to_lines([msg])[0])
    assert ts == T_END


def test_collective_profile_line_tags_the_call_and_leaves_untimed_estimates_out() -> None:
    tags, fields, _ = check_against_schema(ip.collective_profile_line(collective_profile()))
    assert tags == {"host": "h01", "job": "j42", "comm": "0xabc", "operation": "AllReduce", "datatype": "7",
                    "count": "262144"}
    assert fields["calls"] == 3 and fields["bytes"] == 3 * 1048576 and fields["ranks"] == "0,1"
    assert fields["bus_bw_bytes_per_s"] == 3932160000.0 and "peers" not in fields
    _, untimed, _ = check_against_schema(ip.collective_profile_line(collective_profile(
        operation="Send", peers=[3, 5], first_call_ns=0, last_call_ns=0, timed_calls=0, timed_ns=0,
        algo_bw_bytes_per_s=0.0, bus_bw_bytes_per_s=0.0)))
    assert untimed["peers"] == "3,5"
    assert not {"first_call_ns", "last_call_ns", "algo_bw_bytes_per_s", "bus_bw_bytes_per_s"} & set(untimed)


def test_invalid_measurement_is_absent_not_zero() -> None:
    tags, fields, _ = check_against_schema(ip.link_load_line(link_load(measured_valid=False)))
    assert fields == {"attributed_bytes": 120_000_000_000, "flow_count": 3, "measured_valid": 0}
    assert tags["link"] == LINK


def test_congestion_lines_leave_unknown_groups_out() -> None:
    """A group whose *_valid is false is absent (unknown), its flag written as 0; a valid zero is written."""
    tags, fields, _ = check_against_schema(ip.link_congestion_line(link_congestion()))
    assert tags == {"link": LINK, "src_node": "leaf-01", "dst_node": "spine-01"}
    assert fields == {"pfc_pauses_received": 45, "pfc_pauses_received_roce": 40, "pfc_pauses_sent": 2,
                      "pfc_pauses_sent_roce": 2, "ecn_marked_pkts": 101, "ecn_marked_pkts_roce": 100,
                      "queue_watermark_bytes": 9000, "queue_watermark_bytes_roce": 5000,
                      "pfc_valid": 1, "ecn_valid": 1, "drops_valid": 0, "watermark_valid": 1}
    tags, fields, _ = check_against_schema(ip.nic_congestion_line(nic_congestion()))
    assert tags == {"nic": "h01:mlx5_0", "leaf": "leaf-01"}
    assert fields == {"ecn_marked_received": 7, "cnp_sent": 7, "cnp_handled": 0, "cnp_ignored": 0,
                      "out_of_sequence": 1, "packet_seq_err": 0, "local_ack_timeout_err": 0,
                      "implied_nak_seq_err": 0, "cnp_valid": 1, "retransmit_valid": 1, "pfc_valid": 0}
    with pytest.raises(PointError, match=r"NicCongestionSample nic='h01:mlx5_0' .*schema_version 2"):
        ip.nic_congestion_line(nic_congestion(schema_version=2))


def test_fim_fields_and_tags_by_basis_and_scope() -> None:
    tags, fields, _ = check_against_schema(ip.fim_line(fim()))
    assert tags == {"group": "leaf-01:spine-01|spine-02", "switch": "leaf-01", "basis": "attributed"}
    assert fields == {"fim": 0.5, "fim_flows": 0.0, "max_mean_ratio": 1.5, "cv": 0.5, "total_bytes": 200,
                      "members": 2}
    tags, fields, _ = check_against_schema(ip.fim_line(fim(group="fabric", switch="", basis=a.LOAD_BASIS_MEASURED)))
    assert tags == {"group": "fabric", "basis": "measured"}
    assert "fim_flows" not in fields
    with pytest.raises(PointError, match=r"FimSample group='fabric' .*LOAD_BASIS_UNSPECIFIED"):
        ip.fim_line(fim(group="fabric", basis=a.LOAD_BASIS_UNSPECIFIED))


def test_path_tag_is_the_switch_part() -> None:
    tags, fields, _ = check_against_schema(ip.path_load_line(path_load()))
    assert tags == {"src_nic": "h01:mlx5_0", "dst_nic": "h09:mlx5_0", "resolver": "infer",
                    "path": f"{LINK}|spine-01:Ethernet1/3>leaf-03:Ethernet1/1"}
    assert fields == {"bytes": 9_000_000_000, "flow_count": 2, "confidence": 0.875}
    # NICs named by device only, links only in path_id, both NICs on one leaf.
    same_leaf = ["h01:mlx5_0>leaf-01:Ethernet1/9", "leaf-01:Ethernet1/10>h02:mlx5_0"]
    msg = path_load(src_nic="mlx5_0", dst_host="h02", dst_nic="mlx5_0", path_id="|".join(same_leaf), links=[])
    tags, _, _ = check_against_schema(ip.path_load_line(msg))
    assert (tags["src_nic"], tags["dst_nic"], tags["path"]) == ("h01:mlx5_0", "h02:mlx5_0", ip.SAME_LEAF)


def test_collision_fields() -> None:
    tags, fields, _ = check_against_schema(ip.collision_line(collision()))
    assert tags == {"group": "leaf-01:spine-01|spine-02", "switch": "leaf-01", "link": LINK, "resolver": "hash"}
    assert fields == {
        "link_utilization": 0.96, "idle_utilization": 0.0, "idle_link": "leaf-01:Ethernet1/2>spine-02:Ethernet1/1",
        "flow_count": 2, "flow_bytes": 2_000_000_000, "top_bytes": 1_200_000_000,
        "flows": "10.0.0.1>10.0.3.1:sport=52208 job=j42 coll=AllReduce 1.2GB; 10.0.0.2>10.0.3.2:sport=49152 800.0MB",
        "harmful": 0, "link_ecn_marked_pkts": 0, "link_dropped_pkts": 0, "link_pfc_pauses": 0,
        "idle_ecn_marked_pkts": 0, "idle_dropped_pkts": 0, "idle_pfc_pauses": 0, "receiver_cnps": 0,
    }  # harm unknown: no harm_basis field, harmful 0
    judged = collision()
    judged.harmful, judged.harm_basis, judged.link_ecn_marked_pkts, judged.receiver_cnps = True, "switch", 886, 797
    _, fields, _ = check_against_schema(ip.collision_line(judged))
    assert (fields["harmful"], fields["harm_basis"], fields["link_ecn_marked_pkts"], fields["receiver_cnps"]) == \
        (1, "switch", 886, 797)
    many = [flow("10.0.0.1", "10.0.3.1", 1000 + i, 10 - i) for i in range(ip.MAX_FLOWS_TEXT + 3)]
    _, fields, _ = check_against_schema(ip.collision_line(collision(flows=many)))
    assert fields["flows"].endswith("; +3 more") and fields["flow_count"] == ip.MAX_FLOWS_TEXT + 3
    assert fields["top_bytes"] == 10


@pytest.mark.parametrize(("n", "text"), [(0, "0B"), (999, "999B"), (1000, "1.0kB"), (1_234_567, "1.2MB"),
                                         (1_200_000_000, "1.2GB"), (3_000_000_000_000, "3.0TB")])
def test_human_bytes(n: int, text: str) -> None:
    assert ip.human_bytes(n) == text


def test_special_characters_round_trip() -> None:
    """Tag values with the line-protocol separators and backslashes (also trailing) and a string
    field with quotes, backslashes and a line break come back intact (the break as the text \\n)."""
    odd = 'leaf 02,rack=7\\x:Eth"1>spine\\'
    msg = collision(link=odd, switch="sw 1", group="g=1,2", idle_link='a "b"\\c\nd')
    line = ip.collision_line(msg)
    tags, fields, _ = check_against_schema(line)
    assert tags["link"] == odd and tags["switch"] == "sw 1" and tags["group"] == "g=1,2"
    assert fields["idle_link"] == 'a "b"\\c\\nd'


@pytest.mark.parametrize("value", [0.0, 1.0, 1e-05, 1.5e20, 0.1, 2.0**-30, 123456789.0])
def test_floats_are_never_written_like_integers(value: float) -> None:
    _, fields, _ = check_against_schema(ip.link_load_line(link_load(utilization=value)))
    assert fields["utilization"] == value


@pytest.mark.parametrize(("msg", "error"), [
    (link_load(utilization=math.nan), r"LinkLoad link='leaf-01:.*' window_end_ns=1704067210000000000: "
                                      r"field 'utilization': nan is not finite"),
    (link_load(measured_bytes=2**63), r"field 'measured_bytes': 9223372036854775808 does not fit"),
    (link_load(schema_version=0), r"schema_version 0 \(these encoders know 1\)"),
    (link_load(resolver=""), r"tag 'resolver' is empty"),
    (link_load(window_end_ns=0), r"window_end_ns=0 is not a timestamp"),
    (path_load(src_nic=""), r"PathLoad path_id='h01:.*tag 'src_nic' is empty"),
    (collision(group=""), r"Collision group='' link=.*tag 'group' is empty"),
    (fim(cv=math.inf), r"field 'cv': inf is not finite"),
])
def test_bad_messages_are_refused_with_where(msg: Any, error: str) -> None:
    with pytest.raises(PointError, match=error):
        to_lines([msg])


def test_to_lines_keeps_order_and_refuses_other_messages() -> None:
    lines = to_lines([fim(), link_load(), collision(), path_load()])
    assert [ln.split(",", 1)[0] for ln in lines] == ["fim", "link_load", "collision", "path_load"]
    with pytest.raises(PointError, match="no line encoder for DeadLetter"):
        to_lines([a.DeadLetter()])


def flow_path(**kw: Any) -> a.FlowPath:
    m = a.FlowPath(schema_version=1, window_start_ns=T_START, window_end_ns=T_END, flow_id="h01:mlx5_0/7/1",
                   key=c.FlowKey(src_ip="10.0.0.1", dst_ip="10.0.3.1", udp_src_port=52208, udp_dst_port=4791),
                   src_host="h01", src_nic="mlx5_0", dst_host="h03", dst_nic="mlx5_0", job_id="j42",
                   links=["h01:mlx5_0>leaf-01:e1", LINK, "spine-01:e2>leaf-02:e5", "leaf-02:e1>h03:mlx5_0"],
                   method="hash", confidence=1.0, path_share=1.0, bytes=10**9,
                   change=a.FLOW_PATH_CHANGE_PATH, resolver="hash")
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def test_flow_path_line_tags_the_nic_pair_path_and_job_and_keeps_the_flow_a_field() -> None:
    tags, fields, ts = check_against_schema(to_lines([flow_path()])[0])
    assert tags == {"src_nic": "h01:mlx5_0", "dst_nic": "h03:mlx5_0", "path": f"{LINK}|spine-01:e2>leaf-02:e5",
                    "job": "j42", "resolver": "hash"} and ts == T_END
    assert fields == {"flow_id": "h01:mlx5_0/7/1", "udp_src_port": 52208, "change": "path", "method": "hash",
                      "bytes": 10**9, "confidence": 1.0, "path_share": 1.0}
    tags, _, _ = check_against_schema(ip.flow_path_line(flow_path(job_id="")))
    assert "job" not in tags  # absent, not empty
    with pytest.raises(PointError, match=r"FlowPath flow_id='h01:mlx5_0/7/1'.*change 0"):
        ip.flow_path_line(flow_path(change=a.FLOW_PATH_CHANGE_UNSPECIFIED))
