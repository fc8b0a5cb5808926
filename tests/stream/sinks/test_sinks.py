"""The sinks against real stores: InfluxSink into VictoriaMetrics (the session fixture, plus private
instances that are stopped and restarted to play an outage), FileSink into a file that is then
loaded into VictoriaMetrics the way ``influx write`` would send it.

What is proven: every measurement reads back with its tags, values, integer types and window-end
timestamp; a replayed window does not duplicate; during an outage write() accepts up to the bound,
then pushes back, nothing is durable, and after the store returns everything lands; permanent
failures surface through raise_if_failed; the token appears in no log line and no repr; the ledger
stays exact over many batches (it checks order byte for byte); close does not keep threads alive.

VictoriaMetrics keeps floats to ~12 significant digits and string fields as 0, so floats here have
few digits and string fields are only checked to exist (their text is checked in
test_line_protocol.py).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from flowtracer.schemas.v1 import analytics_pb2 as a
from flowtracer.schemas.v1 import common_pb2 as c
from flowtracer.stream.sinks.base import Sink, SinkBackpressure, SinkFailed
from flowtracer.stream.sinks.file import FileSink, FileSinkConfig
from flowtracer.stream.sinks.influx import InfluxConfig, InfluxSink, _Ledger
from flowtracer.stream.sinks.null import NullSink
from flowtracer.stream.sinks.registry import SINKS
from flowtracer.stream.stages.outputs import MEASUREMENTS, to_lines
from flowtracer.testbed.victoriametrics import VictoriaMetrics

TOKEN = "ft-test-token-7c1e0d5b9a"  # only ever in the environment; must never show up in logs
T0 = 1_704_067_200_000_000_000  # 2024-01-01T00:00:00Z
S = 1_000_000_000  # ns per s
MS = 1_000_000


@pytest.fixture(autouse=True)
def token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INFLUX_TOKEN", raising=False)
    monkeypatch.setenv("FLOWTRACER_INFLUX_TOKEN", TOKEN)


def config(url: str, **kw: Any) -> InfluxConfig:
    """Fast settings for tests: small batches, short flush interval and retry delays."""
    opts: dict[str, Any] = {"url": url, "org": "flowtracer", "bucket": "flowtracer", "batch_size": 50,
                            "flush_interval": "20ms", "retry_interval": "20ms", "max_retry_delay": "100ms",
                            "timeout": "2s"}
    return InfluxConfig(**(opts | kw))


@pytest.fixture
def sinks() -> Iterator[list[InfluxSink]]:
    """Sinks made by the test; closed afterwards even when the test fails."""
    made: list[InfluxSink] = []
    yield made
    for s in made:
        s.close(timeout=0.5)


def wait_durable(sink: Sink, ticket: int, timeout_s: float = 10.0) -> None:
    def durable() -> bool:
        sink.raise_if_failed()
        return sink.durable(ticket)

    wait_for(durable, timeout_s, f"ticket {ticket} to be durable in {sink!r}")


def wait_failed(sink: Sink, timeout_s: float = 10.0) -> SinkFailed:
    """The SinkFailed that raise_if_failed raises within *timeout_s*."""
    failure: list[SinkFailed] = []

    def failed() -> bool:
        try:
            sink.raise_if_failed()
        except SinkFailed as e:
            failure.append(e)
        return bool(failure)

    wait_for(failed, timeout_s, f"{sink!r} to fail")
    return failure[0]


def messages(uid: str, window: int) -> list[Any]:
    """One message of every kind (two LinkLoads: valid and not; two FimSamples: group and fabric)
    for window *window*, with *uid* in a tag of each so tests do not see each other's data."""
    end = T0 + (window + 1) * 10 * S
    common = {"schema_version": 1, "window_start_ns": end - 10 * S, "window_end_ns": end}
    flows = [c.FlowRef(key=c.FlowKey(src_ip="10.0.0.1", dst_ip="10.0.3.1", udp_src_port=52208), job_id="j42",
                       collective="AllReduce", bytes=1_200_000_000 + window),
             c.FlowRef(key=c.FlowKey(src_ip="10.0.0.2", dst_ip="10.0.3.2", udp_src_port=49152), bytes=800_000)]
    return [
        a.LinkLoad(**common, link=f"{uid}-leaf1:Ethernet1>spine1:Ethernet1", src_node="leaf1", dst_node="spine1",
                   measured_bytes=1_000 + window, measured_valid=True, attributed_bytes=1_005, unexplained_bytes=-5,
                   utilization=0.125, flow_count=3, resolver="hash"),
        a.LinkLoad(**common, link=f"{uid}-spine1:Ethernet1>leaf1:Ethernet1", src_node="spine1", dst_node="leaf1",
                   measured_valid=False, attributed_bytes=7, flow_count=1, resolver="hash"),
        a.PathLoad(**common, src_host="h1", src_nic=f"{uid}-h1:mlx5_0", dst_host="h2", dst_nic="h2:mlx5_0",
                   links=[f"{uid}-h1:mlx5_0>leaf1:Ethernet9", "leaf1:Ethernet1>spine1:Ethernet1",
                          "spine1:Ethernet2>leaf2:Ethernet1", "leaf2:Ethernet9>h2:mlx5_0"],
                   bytes=9_007_199_254_740_991, flow_count=2, resolver="infer", confidence=0.875),
        a.FimSample(**common, group=f"{uid}-leaf1:spine1|spine2", switch="leaf1", basis=a.LOAD_BASIS_ATTRIBUTED,
                    members=2, fim=0.25, fim_flows=0.5, max_mean_ratio=1.25, cv=0.25, total_bytes=2_000),
        a.FimSample(**common, group=f"{uid}-fabric", basis=a.LOAD_BASIS_MEASURED, members=4, fim=0.0625,
                    max_mean_ratio=1.0625, cv=0.0625, total_bytes=8_000),
        a.Collision(**common, switch="leaf1", group=f"{uid}-leaf1:spine1|spine2",
                    link="leaf1:Ethernet1>spine1:Ethernet1", link_utilization=0.96,
                    idle_link="leaf1:Ethernet2>spine2:Ethernet1", idle_utilization=0.0, flows=flows, resolver="hash"),
    ]


_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,]+)')


def expected_samples(msgs: list[Any]) -> dict[tuple[str, frozenset[tuple[str, str]]], tuple[int, Any]]:
    """(metric name, labels) -> (timestamp ms, value) as VictoriaMetrics stores the lines: field f
    of measurement m becomes metric m_f, string fields 0. (These lines need no unescaping.)"""
    out = {}
    for line in to_lines(msgs):
        head, rest = line.split(" ", 1)
        fields, ts = rest.rsplit(" ", 1)
        name, *tags = head.split(",")
        labels = frozenset(tuple(t.split("=", 1)) for t in tags)
        for f, v in _FIELD.findall(fields):
            value = 0 if v.startswith('"') else int(v[:-1]) if v.endswith("i") else float(v)
            out[(f"{name}_{f}", labels)] = (int(ts) // MS, value)
    return out


def exported(vm: VictoriaMetrics, uid: str) -> dict[tuple[str, frozenset[tuple[str, str]]], list[tuple[int, Any]]]:
    out = {}
    for label in ("link", "src_nic", "group"):
        for s in vm.export(f'{{{label}=~"{uid}-.*"}}'):
            labels = dict(s["metric"])
            name = labels.pop("__name__")
            out[(name, frozenset(labels.items()))] = list(zip(s["timestamps"], s["values"], strict=True))
    return out


def test_registry_names_come_from_the_classes() -> None:
    assert {"influx": InfluxSink, "file": FileSink, "none": NullSink} == SINKS
    assert all(cls.name == name for name, cls in SINKS.items())


def test_every_measurement_roundtrips_and_replays_do_not_duplicate(
    victoria: VictoriaMetrics, unique_id: str, sinks: list[InfluxSink],
) -> None:
    msgs = messages(unique_id, 0) + messages(unique_id, 1)
    sink = InfluxSink(config(victoria.url))
    sinks.append(sink)
    assert isinstance(sink, Sink)
    wait_durable(sink, sink.write(to_lines(msgs)))
    want = {k: [v] for k, v in expected_samples(messages(unique_id, 0)).items()}
    for k, v in expected_samples(messages(unique_id, 1)).items():
        want[k].append(v)
    got = exported(victoria, unique_id)
    assert got == want
    # Integer fields come back as integers (3 == 3.0 in Python, so check the JSON type).
    int_metrics = {f"{m.name}_{f}" for m in MEASUREMENTS.values() for f, t in m.fields.items() if t == "int"}
    assert {name for name, _ in got} & int_metrics
    for (name, _), samples in got.items():
        if name in int_metrics:
            assert all(type(v) is int for _, v in samples), (name, samples)
    assert not any(name in ("link_load_measured_bytes", "link_load_utilization") and ("link", f"{unique_id}-spine1:"
               "Ethernet1>leaf1:Ethernet1") in labels for name, labels in got)  # absent, not 0

    # Replay after a "crash": a new sink writes window 1 again; still one sample per window.
    sink.close()
    replay = InfluxSink(config(victoria.url))
    sinks.append(replay)
    wait_durable(replay, replay.write(to_lines(messages(unique_id, 1))))
    assert exported(victoria, unique_id) == want


def test_outage_backpressure_then_everything_lands(unique_id: str, sinks: list[InfluxSink]) -> None:
    store = VictoriaMetrics().start()
    port = store.port
    store.stop()  # the store is down; the sink starts anyway
    sink = InfluxSink(config(f"http://127.0.0.1:{port}", batch_size=5, max_pending_points=20, max_retries=10_000))
    sinks.append(sink)

    def lines(i: int) -> list[str]:
        return [f"outage,test_id={unique_id} v={i * 5 + j}i {T0 + (i * 5 + j) * MS}" for j in range(5)]

    tickets = [sink.write(lines(i)) for i in range(4)]  # 20 points: exactly the bound
    assert tickets == [5, 10, 15, 20]
    with pytest.raises(SinkBackpressure, match=r"20 points waiting for the store \(limit 20\)") as bp:
        sink.write(lines(4))
    assert (bp.value.pending, bp.value.limit) == (20, 20)
    wait_for(lambda: sink.stats()["retries"] > 0, 10, "the sink to retry")
    assert sink.stats()["retries"] > 0
    assert not sink.durable(tickets[0])
    sink.raise_if_failed()  # retrying is not failing

    with VictoriaMetrics(port=port) as store:  # the store returns on the same address
        wait_durable(sink, tickets[-1])
        wait_durable(sink, sink.write(lines(4)))  # what was pushed back is written once retried
        [series] = store.export(f'{{test_id="{unique_id}"}}')
    assert series["values"] == list(range(25))
    assert series["timestamps"] == [T0 // MS + i for i in range(25)]
    assert sink.stats()["failed"] == 0


def test_rejected_batch_is_handed_back_and_writing_continues(victoria: VictoriaMetrics, unique_id: str,
                                                             sinks: list[InfluxSink]) -> None:
    """VictoriaMetrics answers 400 to a line over 256 KiB that ends the request (one that does not
    end it is skipped with 204!). A 400 would be refused on every replay, so the batch is rejected,
    not a failure: it holds ``durable`` back until take_rejected hands it over, later batches are
    written, and nothing is retried."""
    sink = InfluxSink(config(victoria.url, batch_size=2))
    sinks.append(sink)
    ok = sink.write([f"rejected,test_id={unique_id} v=1i {T0}"] * 2)
    wait_durable(sink, ok)
    refused = [f"rejected v=2i {T0 + S}", f'rejected,test_id={unique_id} s="{"x" * 300_000}" {T0 + S}']
    bad = sink.write(refused)
    after = sink.write([f"rejected,test_id={unique_id} v=3i {T0 + 2 * S}"] * 2)
    wait_for(lambda: sink.stats()["batches_ok"] == 2, 10, "the batch after the refused one to be written")
    assert not sink.durable(bad) and not sink.durable(after)  # not until the refused lines are taken
    [rejected] = sink.take_rejected()
    assert rejected.lines == refused and rejected.status == 400
    assert re.fullmatch(r"InfluxDB at \S+ refused 2 points: HTTP 400: .+", rejected.reason)
    assert sink.durable(after) and sink.take_rejected() == []
    sink.raise_if_failed()
    assert sink.stats() | {"submitted": 0} == {"submitted": 0, "durable": 6, "failed": 0, "rejected": 2, "pending": 0,
                                               "batches_ok": 2, "batches_rejected": 1, "retries": 0}
    [series] = victoria.export(f'{{test_id="{unique_id}",__name__="rejected_v"}}')
    assert sorted(set(series["values"])) == [1, 3]


def test_exhausted_retries_fail_the_sink(sinks: list[InfluxSink]) -> None:
    store = VictoriaMetrics().start()
    url = store.url
    store.stop()
    sink = InfluxSink(config(url, max_retries=2))
    sinks.append(sink)
    ticket = sink.write([f"gone v=1i {T0}"])
    assert "Connection refused" in str(wait_failed(sink))
    assert not sink.durable(ticket)
    assert sink.stats()["retries"] == 2


def test_token_is_in_no_log_and_no_repr(
    victoria: VictoriaMetrics, caplog: pytest.LogCaptureFixture, tmp_path: Path, sinks: list[InfluxSink],
) -> None:
    caplog.set_level(logging.DEBUG)  # everything: urllib3, influxdb_client, ours
    cfg = config(victoria.url)
    sink = InfluxSink(cfg)
    sinks.append(sink)
    wait_durable(sink, sink.write([f"tok v=1i {T0}"]))
    store = VictoriaMetrics().start()
    down_url = store.url
    store.stop()
    failing = InfluxSink(config(down_url, max_retries=1))
    sinks.append(failing)
    failing.write([f"tok v=1i {T0}"])
    failed = wait_failed(failing)
    failing.close()
    sink.close()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    from_file = config(victoria.url, token_file=token_file)
    assert from_file.token.get_secret_value() == TOKEN
    shown = [caplog.text, repr(sink), str(sink), repr(cfg), str(cfg), cfg.model_dump_json(), repr(from_file),
             str(failed), str(sink.stats())]
    assert "Connection refused" in caplog.text  # the failure was logged...
    assert not [s for s in shown if TOKEN in s]  # ...without the token


@pytest.mark.parametrize(("kw", "env", "error"), [
    ({}, {}, r"token: no InfluxDB token: environment variable FLOWTRACER_INFLUX_TOKEN / INFLUX_TOKEN is not set"),
    ({"token_env": "MY_TOKEN"}, {}, r"token_env: no InfluxDB token: environment variable MY_TOKEN is not set"),
    ({"token": "abc"}, {"INFLUX_TOKEN": "x"}, r"token: not accepted in the config .* set token_file or token_env"),
    ({"url": "localhost:8086"}, {"INFLUX_TOKEN": "x"}, r"url: 'localhost:8086' is not an http:// or https:// URL"),
    ({"url": "http://u:p@h:8086"}, {"INFLUX_TOKEN": "x"}, r"url: credentials in the URL would be logged"),
    ({"flush_interval": "soon"}, {"INFLUX_TOKEN": "x"}, r"flush_interval\n.*'soon' is not a duration"),
    ({"max_pending_points": 10}, {"INFLUX_TOKEN": "x"}, r"max_pending_points \(10\) must be at least batch_size"),
    ({"token_file": "/nonexistent/t"}, {}, r"token_file: cannot read /nonexistent/t"),
])
def test_config_errors_name_the_field(monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any], env: dict[str, str],
                                      error: str) -> None:
    monkeypatch.delenv("FLOWTRACER_INFLUX_TOKEN")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    data = {"url": "http://127.0.0.1:8086", "org": "o", "bucket": "b"} | kw
    with pytest.raises(ValueError, match=error):
        InfluxConfig.model_validate(data)


def test_config_defaults_and_durations() -> None:
    cfg = InfluxConfig.model_validate({"url": "https://influx:8086", "org": "o", "bucket": "b",
                                       "flush_interval": "250ms", "max_retry_delay": "2m"})
    opts = cfg.write_options()
    assert (opts.batch_size, opts.flush_interval, opts.max_retry_delay, opts.retry_interval) == (5000, 250, 120_000,
                                                                                                 1000)
    assert opts.write_scheduler is not cfg.write_options().write_scheduler  # a writer thread per sink


def test_ledger_stays_exact_over_many_batches(victoria: VictoriaMetrics, unique_id: str,
                                              sinks: list[InfluxSink]) -> None:
    """Batches closed by count (on the caller's thread) and by time (on the timer thread)
    interleave; the ledger compares every confirmed batch with the oldest pending lines, so any
    reordering would fail the sink."""
    sink = InfluxSink(config(victoria.url, batch_size=7, flush_interval="5ms"))
    sinks.append(sink)
    n = 0
    ticket = 0
    for i in range(60):
        size = (i * 7919) % 23 + 1
        ticket = sink.write([f"ledger,test_id={unique_id} v={n + j}i {T0 + (n + j) * MS}" for j in range(size)])
        n += size
        if i % 5 == 0:
            time.sleep(0.006)  # let the timer close a partial window now and then
    assert ticket == n
    wait_durable(sink, ticket)
    stats = sink.stats()
    assert (stats["durable"], stats["failed"], stats["pending"]) == (n, 0, 0)
    assert stats["batches_ok"] > n / 7
    [series] = victoria.export(f'{{test_id="{unique_id}"}}')
    assert series["values"] == list(range(n))


def test_ledger_rules() -> None:
    led = _Ledger(limit=4)
    assert led.submit([b"a", b"b", b"c"], 1.0) == 3
    with pytest.raises(SinkBackpressure):
        led.submit([b"d", b"e"], 1.0)
    assert led.settle(b"a\nb", ok=True) and led.durable == 2
    assert led.submit([b"d", b"e"], 1.0) == 5
    assert not led.settle(b"d", ok=True)  # not the oldest pending line ("c"): out of order
    assert led.durable == 2 and led.broken
    empty = _Ledger(limit=2)
    assert empty.submit([b"1", b"2", b"3"], 1.0) == 3  # oversized, but nothing pending: taken
    assert empty.settle(b"1\n2\n3", ok=False) and empty.durable == 0 and empty.failed == 3


def test_close_drains_and_leaves_no_thread_behind(victoria: VictoriaMetrics, unique_id: str) -> None:
    """close() sends the open partial batch at once (not after flush_interval) and, once the sink
    has lived one flush_interval, leaves no timer thread that would hold the process at exit."""
    before = set(threading.enumerate())
    sink = InfluxSink(config(victoria.url, batch_size=1000, flush_interval="1s"))
    time.sleep(1.1)  # past the first window timer, which the sink cannot reach (module docstring)
    ticket = sink.write([f"closing,test_id={unique_id} v=1i {T0}"])
    started = time.monotonic()
    sink.close(timeout=5)
    closed_after = time.monotonic() - started
    assert sink.durable(ticket)
    assert closed_after < 0.9, closed_after  # did not wait for the 1 s window
    def left() -> list[threading.Thread]:
        return [t for t in set(threading.enumerate()) - before if t.is_alive() and not t.daemon]

    wait_for(lambda: not left(), 0.5, "the sink's threads to end after close")


def test_close_with_the_store_down_gives_up_within_the_timeout(sinks: list[InfluxSink]) -> None:
    store = VictoriaMetrics().start()
    url = store.url
    store.stop()
    sink = InfluxSink(config(url, max_retries=10_000))
    ticket = sink.write([f"down v=1i {T0}"])
    started = time.monotonic()
    sink.close(timeout=0.3)
    assert time.monotonic() - started < 2.0
    assert not sink.durable(ticket)
    with pytest.raises(SinkFailed, match="closed"):
        sink.write([f"down v=2i {T0}"])


# -- FileSink ----------------------------------------------------------------------------------------

def test_file_sink_roundtrip_loads_into_a_store(victoria: VictoriaMetrics, unique_id: str, tmp_path: Path) -> None:
    """The file is line protocol that a store accepts as is: POSTed to /api/v2/write the way
    ``influx write --file`` sends it, it reads back like the InfluxSink's writes."""
    path = tmp_path / "out" / "flowtracer.lp"
    sink = FileSink(FileSinkConfig(path=path))
    assert isinstance(sink, Sink)
    lines0 = to_lines(messages(unique_id, 0))
    t0 = sink.write(lines0)
    t1 = sink.write(to_lines(messages(unique_id, 1)))
    assert (t0, t1) == (len(lines0), 2 * len(lines0))
    assert sink.durable(t1) and sink.durable(t0)
    sink.close()
    assert sink.durable(t1)
    with pytest.raises(SinkFailed, match="closed"):
        sink.write(lines0)
    text = path.read_text()
    assert text == "\n".join(to_lines(messages(unique_id, 0) + messages(unique_id, 1))) + "\n"

    req = urllib.request.Request(f"{victoria.url}/api/v2/write?org=o&bucket=b&precision=ns", data=text.encode(),
                                 method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 204
    want = {k: [v] for k, v in expected_samples(messages(unique_id, 0)).items()}
    for k, v in expected_samples(messages(unique_id, 1)).items():
        want[k].append(v)
    assert exported(victoria, unique_id) == want


def test_file_sink_appends_and_cuts_a_torn_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "out.lp"
    path.write_bytes(b"m v=1i 1\nm v=2i 2\nm v=3")  # a crash mid-line
    sink = FileSink(FileSinkConfig(path=path, fsync=False))
    assert "cut 5 bytes of a torn last line" in caplog.text
    assert sink.write([]) == 0
    with pytest.raises(ValueError, match=r"line 1 is not a single non-empty line"):
        sink.write(["m v=3i 3", "m v=4i 4\nm v=5i 5"])
    assert sink.durable(sink.write(["m v=3i 3"]))
    sink.close()
    assert path.read_text() == "m v=1i 1\nm v=2i 2\nm v=3i 3\n"
    path.write_bytes(b"no newline at all")
    FileSink(FileSinkConfig(path=path)).close()
    assert path.read_bytes() == b""


@pytest.mark.parametrize(("url", "warned"), [
    ("http://influx.example:8086", True),  # nothing is written: the warning comes when the sink is made
    ("https://influx.example:8086", False),
    ("http://127.0.0.1:8086", False),  # the token never leaves this machine
    ("http://localhost:8086", False),
])
def test_a_token_over_plain_http_is_warned_once(url: str, warned: bool, caplog: pytest.LogCaptureFixture) -> None:
    sink = InfluxSink(config(url))
    sink.close(0.1)
    assert caplog.text.count("token crosses the network in clear") == (1 if warned else 0)
    assert TOKEN not in caplog.text


@pytest.mark.parametrize(("max_bytes", "keep", "files", "rotations", "deleted"), [
    (1000, 3, [10], 0, 0),  # 10 lines of 10 bytes: under the bound
    (50, 3, [5, 5], 1, 0),  # path.1 holds the first 5 lines, path the rest
    (30, 2, [1, 3, 3], 3, 1),  # path, path.1, path.2; the oldest 3 lines deleted
    (30, 0, [1], 3, 3),  # keep=0: the full file is deleted at each rotation
    (5, 1, [1, 1], 9, 8),  # a write larger than the bound still goes in whole
])
def test_file_sink_rotates_at_its_size_bound(tmp_path: Path, max_bytes: int, keep: int, files: list[int],
                                             rotations: int, deleted: int) -> None:
    path = tmp_path / "out.lp"
    sink = FileSink(FileSinkConfig(path=path, max_bytes=max_bytes, keep=keep))
    lines = [f"m v={i}i {i:02d}" for i in range(10)]  # 10 bytes each with the newline
    for line in lines:
        ticket = sink.write([line])
        assert sink.durable(ticket)
    sink.close()
    names = [path, *(path.with_name(f"out.lp.{i}") for i in range(1, keep + 1))]
    kept = [n.read_text().splitlines() for n in names if n.exists()]
    assert [len(k) for k in kept] == files
    assert [line for k in reversed(kept) for line in k] == lines[10 - sum(files):]  # the newest, in order
    assert (sink.rotations, sink.deleted_files) == (rotations, deleted)
    assert sink.deleted_bytes == 10 * (10 - sum(files))
    assert all(n.stat().st_size <= max(max_bytes, 10) for n in names if n.exists())


def test_the_process_command_s_file_sink_gets_its_bounds(tmp_path: Path) -> None:
    from flowtracer.stream.runtime.worker import make_sink

    sink = make_sink(None, "o", "b", None, tmp_path / "out.lp", file_max_bytes=100, file_keep=1)
    assert isinstance(sink, FileSink) and (sink.config.max_bytes, sink.config.keep) == (100, 1)
    sink.close()
