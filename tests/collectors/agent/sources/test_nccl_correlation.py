"""Which send a QP line belongs to: several GPUs in one process, PXN through another process, logs that start after
init, several QPs per connection. Real lines where a real log has them (tests/fixtures/real/nccl), else lines in
the formats NCCL prints (nccl_formats cites them)."""

from __future__ import annotations

from pathlib import Path

from flowtracer.collectors.agent.sources.nccl_log import NcclLog

REAL = Path(__file__).parents[3] / "fixtures" / "real" / "nccl"


def qp(pid: int, gpu: int, net_dev: int, qpn: int) -> str:
    return (f"n1:{pid}:{pid + 50} [{gpu}] NCCL INFO NET/IB: NCCL Dev {net_dev} IbDev {net_dev} Port 1 qpn {qpn} mtu 5 "
            "GID 3 (0/B01000AFFFF0000) fifoRkey=0x1 fifoLkey=0x1")


def init(pid: int, gpu: int, rank: int, nranks: int = 16, comm: str = "0xc0ffee") -> str:
    return (f"n1:{pid}:{pid} [{gpu}] NCCL INFO ncclCommInitAll comm 0x{pid:x}{gpu:02x} rank {rank} nranks {nranks} "
            f"cudaDev {gpu} nvmlDev {gpu} busId 1000 commId {comm} - Init START")


def send(pid: int, gpu: int, rank: int, peer: int, channel: int, via: str) -> str:
    return f"n1:{pid}:{pid} [{gpu}] NCCL INFO Channel {channel:02d}/0 : {rank}[{gpu}] -> {peer}[{gpu}] [send] via {via}"


def tag(log: NcclLog, pid: int, device: str, qpn: int) -> tuple[str, int, int, int]:
    t = log.tag(pid, device, qpn)
    assert t is not None
    return t.comm.id, t.comm.rank, t.channel, t.peer_rank


def test_one_process_driving_several_gpus_tags_each_qp_with_its_own_gpus_rank() -> None:
    """nccl-tests -g 2: one pid, a communicator per GPU, sends of both GPUs on net device 0; the proxy threads'
    QP lines come in the other order. Each QP gets the rank of the GPU whose proxy created it."""
    using = "n1:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>"
    log = NcclLog()
    log.feed([using, init(100, 0, 0), init(100, 1, 1),
              send(100, 0, 0, 2, 0, "NET/IB/0"), send(100, 1, 1, 3, 0, "NET/IB/0"),
              qp(100, 1, 0, 501), qp(100, 0, 0, 500)])
    assert tag(log, 100, "mlx5_0", 500) == ("0xc0ffee", 0, 0, 2)
    assert tag(log, 100, "mlx5_0", 501) == ("0xc0ffee", 1, 0, 3)  # not the last-initialised communicator's rank 0


def test_a_real_eight_gpu_process_sends_of_gpu_5_get_rank_5() -> None:
    """nccl/issues/1412: GPU 5 of one process sends channels 3 and 7 to rank 12 on net device 3; the QP lines its
    proxy would print (2.2x format) after the real lines take those sends, whichever GPU initialised last."""
    log = NcclLog()
    log.feed((REAL / "nccl-1412_one-process-8-gpus.log").read_text().splitlines())
    log.feed([init(2017630, 0, 0, comm="0x49bbd7790311d5eb").replace("Init START", "Init COMPLETE"),
              qp(2017630, 5, 3, 700), qp(2017630, 5, 3, 701)])
    assert tag(log, 2017630, "", 700) == ("0x49bbd7790311d5eb", 5, 3, 12)
    assert tag(log, 2017630, "", 701) == ("0x49bbd7790311d5eb", 5, 7, 12)


def test_a_log_that_starts_after_init_still_tags_rank_channel_and_peer() -> None:
    """The real 2.20.5 log without its lines 10-29 (``Init START`` to ``comm ... nRanks``, the communicator lines
    before its connections): the Channel lines give rank, channel and peer; ``Init COMPLETE`` later names the
    communicator, and without it the tags keep all but its name."""
    lines = (REAL / "ring2-node0_2.20.5_torchrun.log").read_text().splitlines()
    log = NcclLog()
    log.feed(lines[:9])  # up to the NET/IB : Using line
    log.feed(lines[29:])
    assert tag(log, 4744, "rxe0", 34) == ("0x1f82f8f6b7863cd3", 0, 0, 1)
    assert tag(log, 4744, "rxe0", 36) == ("0x1f82f8f6b7863cd3", 0, 0, 2)
    log = NcclLog()
    log.feed(lines[:9] + lines[29:57])  # and it ends before Init COMPLETE
    assert tag(log, 4744, "rxe0", 34) == ("", 0, 0, 1)


PXN_USING = "n1:{pid}:{pid} [{gpu}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>"


def test_a_pxn_send_is_paired_with_the_qps_of_the_proxy_ranks_process() -> None:
    """Rank 0 (pid 100, GPU 0) sends to rank 15 through the NIC of local rank 7 (pid 107, GPU 7): ``via
    NET/IB/1(7)``. The QP is created, and its line printed, by pid 107's proxy: it carries rank 0's send."""
    head = [PXN_USING.format(pid=100, gpu=0), PXN_USING.format(pid=107, gpu=7), init(100, 0, 0), init(107, 7, 7)]
    body = [send(100, 0, 0, 15, 7, "NET/IB/1(7)/GDRDMA"), send(107, 7, 7, 15, 1, "NET/IB/1/GDRDMA"),
            qp(107, 7, 1, 900), qp(107, 7, 1, 901)]
    log = NcclLog()
    log.feed(head + body)
    assert tag(log, 107, "mlx5_1", 900) == ("0xc0ffee", 0, 7, 15)  # rank 0's send, in the proxy's process
    assert tag(log, 107, "mlx5_1", 901) == ("0xc0ffee", 7, 1, 15)
    assert log.tag(100, "mlx5_1", 777) is not None and log.tag(100, "", 900).comm.rank == 0


def test_a_pxn_send_waits_for_its_proxy_process_to_log() -> None:
    log = NcclLog()
    log.feed([PXN_USING.format(pid=100, gpu=0), init(100, 0, 0), send(100, 0, 0, 15, 7, "NET/IB/1(7)/GDRDMA")])
    log.feed([PXN_USING.format(pid=107, gpu=7), init(107, 7, 7), qp(107, 7, 1, 900)])
    assert tag(log, 107, "mlx5_1", 900) == ("0xc0ffee", 0, 7, 15)


def test_qps_per_connection_share_one_send() -> None:
    log = NcclLog()
    log.feed(["n1:100:100 [0] NCCL INFO NCCL_IB_QPS_PER_CONNECTION set by environment to 2.",
              init(100, 0, 0), send(100, 0, 0, 1, 0, "NET/IB/0"), send(100, 0, 0, 1, 1, "NET/IB/0")]
             + [qp(100, 0, 0, q) for q in (10, 11, 12, 13)])
    assert [tag(log, 100, "", q)[2] for q in (10, 11, 12, 13)] == [0, 0, 1, 1]
