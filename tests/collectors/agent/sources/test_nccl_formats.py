"""NCCL INFO messages of every version, as NCCL's format strings print them (NVIDIA/nccl at the tags named; the
lines are those format strings filled in), and what ``parse_message`` makes of them."""

from __future__ import annotations

import pytest

from flowtracer.collectors.agent.sources.nccl_formats import (
    IGNORED,
    OTHER,
    CommEvent,
    Conn,
    Devices,
    Qp,
    Setting,
    Unknown,
    parse_message,
)


@pytest.mark.parametrize(("msg", "want"), [
    # v2.7.3-1 net_ib.cc:455 / :461 (to v2.18.x), also the SHARP plugin's ib_plugin.c
    ("NET/IB: Dev 1 Port 1 qpn 3038 mtu 5 LID 37", Qp(1, 1, 1, 3038)),
    ("NET/IB: Dev 0 Port 1 qpn 4711 mtu 5 GID 3 (0/B01000AFFFF0000)", Qp(0, 0, 1, 4711)),
    # v2.19.3-1 net_ib.cc:689: query_ece before GID
    ("NET/IB: Dev 2 Port 1 qpn 77 mtu 5 query_ece={supported=1, vendor_id=0x15b3, options=0x30000002, "
     "comp_mask=0x0} GID 3 (0/B01000AFFFF0000)", Qp(2, 2, 1, 77)),
    # v2.20.3-1 net_ib.cc:847/855 .. v2.29.3-1 connect.cc:644/649
    ("NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 34 mtu 3 query_ece={supported=0, vendor_id=0x0, options=0x0, "
     "comp_mask=0x0} GID 1 (0/19001EACFFFF0000) fifoRkey=0x4fd5 fifoLkey=0x4fd5", Qp(0, 0, 1, 34)),
    ("NET/IB: NCCL MergedDev 1 IbDev 3 Port 1 qpn 900 mtu 5 LID 7 subnet-prefix 0  FLID 0 fifoRkey=0x1 "
     "fifoLkey=0x2", Qp(1, 3, 1, 900)),
    ("NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 12 mtu 5 GID 3 (0/1) ctsFifoRkey=0x1 ctsFifoLkey=0x1", Qp(0, 0, 1, 12)),
    # v2.29.7-1 connect.cc:652/657 (__func__ = ncclIbConnect), v2.30.7-1 connect.cc:957 (ncclIbConnectImpl)
    ("NET/IB: ncclIbConnect: NCCL Dev 0 IbDev 0 Port 1 qp_num 1234 mtu 5 GID 3 (0/1064A8C0FFFF0000) "
     "ctsFifoRkey=0x1b9e9c ctsFifoLkey=0x1b9e9c", Qp(0, 0, 1, 1234)),
    ("NET/IB: ncclIbConnectImpl: NCCL MergedDev 1 IbDev 2 Port 1 qp_num 99 mtu 5 LID 12 subnet-prefix 0  FLID 0 "
     "ctsFifoRkey=0x1 ctsFifoLkey=0x1", Qp(1, 2, 1, 99)),
])
def test_qp_lines_of_every_version(msg: str, want: Qp) -> None:
    assert parse_message(msg) == want


@pytest.mark.parametrize("msg", [
    "NET/IB: Dev 0 Port 1 qpn 35 set_ece={supported=1, vendor_id=0x15b3, options=0x0, comp_mask=0x0}",  # 2.19
    "NET/IB: IbDev 0 Port 1 qpn 35 set_ece={supported=0, vendor_id=0x76ce, options=0x0, comp_mask=0x0}",  # 2.20
    "NET/IB: IbDev 1 Port 1 qpn 704 query_ece={supported=1, vendor_id=0x15b3, options=0x30000002, comp_mask=0x0}",
    "NET/IB: ncclIbConnect: Set ECE: IbDev 0 Port 1 qp_num 5 set_ece={supported=1, vendor_id=0x15b3, "
    "options=0x0, comp_mask=0x0}",  # 2.29.7
    "NET/IB: ncclIbConnect: IbDev 0 Port 1 qp_num 5 query_ece={supported=1, vendor_id=0x15b3, options=0x0, "
    "comp_mask=0x0}",
    "NET/IB: ncclIbSenderQpsCreate: QP created: port=1 dev=0 devName=mlx5_0 ndevs=1 nmdevs=1 qp_num=5 pkey=0 "
    "pd=0x1 oooRq=0",  # 2.30
    "NET/IB: ncclIbAccept: Flush QP created: port=1 dev=0 devName=mlx5_0 ndevs=1 nmdevs=1 qp_num=6 pkey=0 pd=0x1",
    "NET/IB: ncclIbAccept: Pre-posting 32 Receive WQEs on QP (qp_num=7, comm=0x1)",
])
def test_known_qp_lines_that_carry_nothing_new_are_ignored(msg: str) -> None:
    assert parse_message(msg) == IGNORED


def test_an_unknown_qp_line_is_unknown_not_other() -> None:
    assert parse_message("NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpnum 12 mtu 5") == Unknown("qp")
    assert parse_message("[0] Created a QP: qp_idx=0, qpn=0x1a, reliable_db=yes") == Unknown("qp")  # GIN, 2.30


@pytest.mark.parametrize(("msg", "devs"), [
    ("NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP [RO]; OOB ibp25s0:10.20.0.119<0>",
     ((0, "mlx5_0", 1), (1, "mlx5_1", 1))),
    # v2.20.3-1 net_ib.cc:313-324: merged devices list their IB devices inside braces
    ("NET/IB : Using [0]={[0] mlx5_0:1/RoCE, [1] mlx5_1:1/RoCE} [1]mlx5_2:1/IB [RO]; OOB eth0:10.0.0.1<0>",
     ((0, "mlx5_0", 1), (1, "mlx5_1", 1), (1, "mlx5_2", 1))),
    ("NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>", ((0, "mlx5_0", 1),)),
])
def test_device_lists(msg: str, devs: tuple) -> None:
    assert parse_message(msg) == Devices(devs)


def test_an_empty_device_list_is_unknown() -> None:
    assert parse_message("NET/IB : Using ; OOB eth0:10.0.0.1<0>") == Unknown("devices")


@pytest.mark.parametrize(("msg", "want"), [
    ("Channel 07/0 : 0[0] -> 15[7] [send] via NET/IBext_v8/0(7)/GDRDMA", Conn(7, 0, 15, True, "IBext_v8", 0, 7, "")),
    ("Channel 02 : 3[3d000] -> 11[3d000] [send] via NET/IB/1/GDRDMA", Conn(2, 3, 11, True, "IB", 1, 3, "")),
    ("Ring 00 : 0[435e00000] -> 1[18100000] [send] via NET/IB/0", Conn(0, 0, 1, True, "IB", 0, 0, "")),
    ("Channel 02/0 : 1[c6000] -> 4[c1000] [receive] via NET/Socket/1 comm 0x95cdeb0 nRanks 08",
     Conn(2, 1, 4, False, "Socket", 1, 1, "0x95cdeb0")),
    ("Channel 00/1 : 1[81000] -> 0[81000] [receive] via NET/IB/1/GDRDMA/Shared", Conn(0, 1, 0, False, "IB", 1, 1, "")),
])
def test_connection_lines(msg: str, want: Conn) -> None:
    assert parse_message(msg) == want


@pytest.mark.parametrize(("msg", "want"), [
    ("Channel 00/0 : 7[7] -> 6[6] via P2P/direct pointer/read", IGNORED),
    ("Channel 00/02 :    0   1   2", OTHER),
    ("Ring 00 : 2 -> 0 -> 1", OTHER),
    ("Channel 00/0 : 0[0] -> garbage [send] via NET/IB/0/GDRDMA", Unknown("channel")),
])
def test_other_channel_lines(msg: str, want: object) -> None:
    assert parse_message(msg) == want


@pytest.mark.parametrize(("msg", "want"), [
    ("ncclCommInitRankConfig comm 0xC53B8F7F6AB0 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId f01000 commId "
     "0x3470ca318760efc8 - Init START", CommEvent("0xc53b8f7f6ab0", 1, 2, "start", "0x3470ca318760efc8", 0)),
    ("comm 0x72a6b00 rank 0 nranks 2 cudaDev 0 busId 81000 commId 0xb2f794396f6d0bd1 - Init COMPLETE",
     CommEvent("0x72a6b00", 0, 2, "complete", "0xb2f794396f6d0bd1", 0)),
    ("comm 0x7f rank 0 nranks 2 cudaDev 1 busId 1b000 - Init COMPLETE", CommEvent("0x7f", 0, 2, "complete", "", 1)),
    ("comm 0x43dc13b0 rank 0 nranks 3 cudaDev 0 busId 80 - Abort COMPLETE", CommEvent("0x43dc13b0", 0, 3, "end", "", 0)),
    ("comm 0x1095e9d0 rank 1 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
     CommEvent("0x1095e9d0", 1, 2, "start", "", -1)),
    ("comm 0x10 something new", Unknown("comm")),
])
def test_communicator_lines(msg: str, want: object) -> None:
    assert parse_message(msg) == want


@pytest.mark.parametrize(("msg", "want"), [
    ("NCCL_IB_TC set by environment to 106.", Setting("NCCL_IB_TC", 106)),
    ("NCCL_IB_QPS_PER_CONNECTION set by environment to 2.", Setting("NCCL_IB_QPS_PER_CONNECTION", 2)),
    ("NCCL_IB_TC set to something", Unknown("setting")),
])
def test_settings(msg: str, want: object) -> None:
    assert parse_message(msg) == want


@pytest.mark.parametrize("msg", [
    "NET/IB: Dev 0 Port 1 qpn 99999999999 mtu 5 LID 1",  # beyond 24 bits
    "Channel 99999999/0 : 0[0] -> 1[0] [send] via NET/IB/0",
    "NCCL_IB_TC set by environment to 4096.",
    "AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 18446744073709551616 datatype 7 op 0 root 0 comm 0x1 "
    "[nranks=2] stream 0x3",
])
def test_numbers_out_of_bounds_raise(msg: str) -> None:
    with pytest.raises(ValueError, match=r"outside|above|more than"):
        parse_message(msg)
