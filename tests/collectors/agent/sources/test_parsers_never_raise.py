"""The host agent's parsers promise never to raise on what a host shows them: malformed input is counted and
skipped. Property-based, seeded with inputs that make a naive parser raise (a 5,000-digit qpn, which would
crash-loop the agent; deeply nested `rdma -j` output, which hits the recursion limit), plus a sysfs tree of garbage
files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flowtracer.collectors.agent.sources.nccl_log import NcclLog
from flowtracer.collectors.agent.sources.rdma_json import parse_res_qp, parse_stat_qp
from flowtracer.collectors.agent.sources.sysfs import read_sysfs

QPN_LINE = "n1:17:20 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn {} mtu 5 GID 3 (0/1) fifoRkey=0x1 fifoLkey=0x1"
TEMPLATES = [
    QPN_LINE,
    "n1:{}:17 [0] NCCL INFO Channel 03/0 : 2[0] -> 3[0] [send] via NET/IB/0",
    "n1:17:17 [0] NCCL INFO Channel {}/0 : 2[0] -> 3[0] [send] via NET/IB/{}",
    "n1:17:17 [0] NCCL INFO AllReduce: opCount {} sendbuff 0x1 recvbuff 0x2 count {} datatype 7 op 0 root 0 "
    "comm 0x55 [nranks=4] stream 0x9",
    "n1:17:17 [0] NCCL INFO comm 0x55 rank {} nranks {} cudaDev 0 busId 1000 - Init COMPLETE",
    "n1:17:17 [0] NCCL INFO NET/IB : Using [{}]mlx5_0:{}/RoCE",
]
numbers = st.one_of(st.integers(min_value=-5, max_value=2**70).map(str), st.just("9" * 5000), st.text(max_size=8))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TEMPLATES), numbers, numbers), max_size=12))
@example([(QPN_LINE, "9" * 5000, "")])
def test_nccl_log_lines_never_raise(lines: list[tuple[str, str, str]]) -> None:
    log = NcclLog()
    text = [t.format(a, b) if t.count("{}") == 2 else t.format(a) for t, a, b in lines]
    log.feed(text)
    assert log.lines == len(text)


def nested(depth: int) -> str:
    return "[" * depth + json.dumps({"ifname": "mlx5_0", "lqpn": 1}) + "]" * depth


json_docs = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["ifname", "lqpn", "rqpn", "type", "state", "sq-psn", "rq-psn", "port", "x"]), inner, max_size=6),
    max_leaves=30).map(json.dumps)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_docs, st.text(max_size=200), st.binary(max_size=200)))
@example(nested(100_000))
@example(nested(5))
@example('[{"ifname": "mlx5_0", "lqpn": ' + "9" * 5000 + "}]")
def test_rdma_json_never_raises(text: str | bytes) -> None:
    parse_res_qp(text)
    parse_stat_qp(text)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["port_xmit_data", "port_rcv_data", "np_cnp_sent", "state", "rate"]),
                       st.binary(max_size=40), max_size=5))
def test_sysfs_files_never_raise(tmp_path: Path, files: dict[str, bytes]) -> None:
    port = tmp_path / "infiniband" / "mlx5_0" / "ports" / "1"
    for sub in ("counters", "hw_counters"):
        (port / sub).mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (port / sub / name).write_bytes(data)
    for name, data in files.items():
        (port / name).write_bytes(data)
    read_sysfs(tmp_path / "infiniband")


@pytest.mark.parametrize("entry", [{"pid": 2**40}, {"port": 2**40}, {"pid": 2**32}, {"port": 256}])
def test_a_qp_with_a_pid_or_port_no_kernel_gives_is_malformed(entry: dict[str, int]) -> None:
    """A pid or port that does not fit Flow's 32-bit fields once made the window's Flow raise (every window: the host
    had no batches while the entry stayed); it is one malformed entry."""
    qp = {"ifname": "mlx5_0", "port": 1, "lqpn": 418, "rqpn": 948, "type": "RC", "state": "RTS", "sq-psn": 100,
          "rq-psn": 1, "pid": 4242, "comm": "x"}
    ok = parse_res_qp(json.dumps([qp]))
    assert (len(ok.records), ok.malformed) == (1, 0)
    bad = parse_res_qp(json.dumps([{**qp, **entry}, qp]))
    assert (len(bad.records), bad.malformed) == (1, 1)
    stat = {"ifname": "mlx5_0", "port": 1, "cntn": 4, "pid": 4242, "lqpn": [418], "rdma_tx_bytes": 1}
    assert parse_stat_qp(json.dumps([{**stat, **entry}, stat])).malformed == 1
