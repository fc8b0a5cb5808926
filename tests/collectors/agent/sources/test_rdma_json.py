"""iproute2 ``rdma -j`` JSON (res-qp.c, stat.c formats) -> QP and counter records."""

from __future__ import annotations

import json
import random
from pathlib import Path

from flowtracer.collectors.agent.sources.rdma_json import (
    QpRecord,
    counter_values,
    parse_res_qp,
    parse_stat_qp,
    per_qp_counters,
)


def test_res_qp_fixture_parses_to_exactly_these_records(fixtures: Path) -> None:
    parsed = parse_res_qp((fixtures / "rdma" / "res_qp.json").read_bytes())
    assert parsed.malformed == 0
    assert parsed.records == [
        QpRecord("mlx5_0", 1, 0, None, "SMI", "RTS", None, 0, 0, "ib_core"),
        QpRecord("mlx5_0", 1, 1, None, "GSI", "RTS", None, 0, 0, "ib_core"),
        QpRecord("mlx5_0", 1, 418, 948, "RC", "RTS", 2012, 16777000, 4242, "python3"),
        QpRecord("mlx5_0", 1, 419, 949, "RC", "RTS", 77, 1000, 4242, "python3"),
        QpRecord("mlx5_0", 1, 420, 420, "RC", "RTS", 5, 5, 4242, "python3"),
        QpRecord("mlx5_0", 1, 421, None, "UD", "RTS", None, 12, 4242, "python3"),
        QpRecord("mlx5_0", 0, 422, 0, "RC", "RESET", 0, 0, 4242, "python3"),  # no port before INIT
        QpRecord("mlx5_1", 1, 133, 8113, "RC", "RTS", 9, 310, 0, "rpcrdma"),  # kernel QP: no pid
    ]


def test_malformed_entries_are_counted_and_skipped(fixtures: Path) -> None:
    parsed = parse_res_qp((fixtures / "rdma" / "res_qp_malformed.json").read_bytes())
    assert [r.lqpn for r in parsed.records] == [500, 506]
    # missing lqpn, string lqpn, 25-bit PSN, negative port, empty ifname, bool PSN, a string, a number
    assert parsed.malformed == 8


def test_stat_qp_fixture_and_which_counters_are_per_qp(fixtures: Path) -> None:
    parsed = parse_stat_qp((fixtures / "rdma" / "stat_qp.json").read_bytes())
    assert parsed.malformed == 0
    c418, shared, kernel = parsed.records
    assert (c418.device, c418.port, c418.cntn, c418.qp_type, c418.pid, c418.comm, c418.lqpns) == (
        "mlx5_0", 1, 4, "RC", 4242, "python3", (418,))
    assert counter_values(c418) == (498765432, 276000, 120034, 2200)
    assert c418.values["rx_write_requests"] == 0 and c418.values["local_ack_timeout_err"] == 0
    assert shared.lqpns == (419, 420) and not shared.per_qp
    assert kernel.per_qp and counter_values(kernel) is None  # no optional counters enabled (kernel < 6.15)
    # Only a counter of one QP with byte counters gives exact per-QP bytes.
    assert list(per_qp_counters(parsed.records)) == [("mlx5_0", 1, 418)]


def test_empty_garbage_and_legacy_documents() -> None:
    assert parse_res_qp("") == ([], 0, 0)
    assert parse_res_qp("[]\n") == ([], 0, 0)
    assert parse_res_qp("Failed to open NETLINK_RDMA socket").malformed == 1
    assert parse_res_qp(b"[{\"ifname\": \"mlx5_0\",").malformed == 1
    assert parse_res_qp(b"\xff\xfe\x00").malformed == 1
    # Old iproute2 (before json_print) nested entries in objects; still read.
    legacy = {"mlx5_0": [{"ifname": "mlx5_0", "port": 1, "lqpn": 7, "rqpn": 8, "type": "RC", "state": "RTS",
                          "sq-psn": 1, "rq-psn": 2, "pid": 1, "comm": "x"}]}
    assert [r.lqpn for r in parse_res_qp(json.dumps(legacy)).records] == [7]
    assert parse_stat_qp('[{"ifname":"mlx5_0","cntn":"4","lqpn":[1]}]').malformed == 1


def test_mutated_documents_never_raise(fixtures: Path) -> None:
    rng = random.Random(5)
    docs = [(fixtures / "rdma" / n).read_bytes() for n in ("res_qp.json", "stat_qp.json")]
    for _ in range(300):
        b = bytearray(rng.choice(docs))
        for _ in range(rng.randrange(1, 6)):
            i = rng.randrange(len(b))
            op = rng.randrange(3)
            if op == 0:
                b[i] = rng.randrange(256)
            elif op == 1:
                del b[i:i + rng.randrange(1, 20)]
            else:
                b[i:i] = rng.choice([b"null", b"-1", b"{}", b"[", b'"x"', b"1e99"])
        for parse in (parse_res_qp, parse_stat_qp):
            r = parse(bytes(b))
            assert r.malformed >= 0 and isinstance(r.records, list)
