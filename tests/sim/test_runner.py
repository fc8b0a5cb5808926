"""The real-time simulation: real gNMI servers whose samples match ground truth, host views on disk."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import grpc
import pytest
from pygnmi.client import gNMIclient
from pygnmi.spec.v080.gnmi_pb2 import CapabilityRequest
from pygnmi.spec.v080.gnmi_pb2_grpc import gNMIStub
from tls_certs import make_ca, make_client_cert, make_server_cert
from waiting import wait_for

from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.target_security import Credentials
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import preset
from flowtracer.sim.runner import RunnerOptions, SimRunner
from flowtracer.sim.switches.server import TlsFiles

COUNTERS = "/interfaces/interface[name=Ethernet3]/state/counters"


def ground_truth_at(gt_dir: Path, t_ns: int, timeout: float = 5.0) -> GroundTruth:
    """Ground truth once it holds the sample at ``t_ns`` (it is flushed right after the switches publish)."""
    loaded: list[GroundTruth] = []

    def reached() -> bool:
        loaded[:] = [GroundTruth.load(gt_dir)]
        return bool(loaded[0].counter_times) and loaded[0].counter_times[-1] >= t_ns

    wait_for(reached, timeout, f"ground truth to reach {t_ns}")
    return loaded[0]


def values(update: dict) -> dict[str, int]:
    return {u["path"].rsplit("/", 1)[-1]: int(u["val"]) for u in update["update"]["update"]}


def test_gnmi_samples_are_tick_ends_and_match_ground_truth(tmp_path: Path) -> None:
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2))
    wl = preset("ring-allreduce", size="256MiB", channels=2, compute_gap="20ms")
    runner = SimRunner(topo, wl, tmp_path, RunnerOptions(tick_s=0.25, gnmi_ports="free", duration_s=30))
    with runner:
        host, port = runner.endpoints["leaf01"].rsplit(":", 1)
        with gNMIclient(target=(host, int(port)), insecure=True, gnmi_timeout=5) as gc:
            sub = gc.subscribe2(subscribe={"subscription": [
                {"path": COUNTERS, "mode": "sample", "sample_interval": 250_000_000}], "encoding": "proto"})
            assert sub.get_update(timeout=5)["sync_response"] is True
            samples = []
            while len(samples) < 3:
                upd = sub.get_update(timeout=5)
                samples.append((upd["update"]["timestamp"], values(upd)))
            sub.close()
        gt = ground_truth_at(tmp_path / "ground-truth", samples[-1][0])
        for ts, vals in samples:
            assert ts % 250_000_000 == 0  # stamped with tick ends, never the wall clock
            truth = gt.counters_at("leaf01", ts)
            assert truth.t_ns == ts
            assert vals["in-octets"] == truth.interfaces["Ethernet3"]["in-octets"]
            assert vals["out-octets"] == truth.interfaces["Ethernet3"]["out-octets"]
        (t0, v0), (t1, v1) = samples[0], samples[-1]
        uplink = "leaf01:Ethernet3>spine01:Ethernet1"
        assert v1["out-octets"] - v0["out-octets"] == gt.link_bytes(t0, t1).get(uplink, 0)
        # Host views are on disk and the topology file points at the bound servers.
        assert (tmp_path / "hosts" / "host01" / "current" / "rdma" / "resource_show_qp.json").exists()
        assert "NCCL INFO" in (tmp_path / "hosts" / "host01" / "nccl.log").read_text()
        assert f"port: {port}" in (tmp_path / "topology.yaml").read_text()
    assert runner.done.is_set() and runner.servers == []
    assert not [t for t in threading.enumerate() if t.name.startswith("sim-")]


def test_shared_port_serves_every_switch_by_target(tmp_path: Path) -> None:
    topo = generate(FabricSpec(hosts=2, leaves=2, spines=1))
    opts = RunnerOptions(tick_s=0.25, shared_port=0, host_views=False, ground_truth=False)
    runner = SimRunner(topo, preset("ring-allreduce", size="64MiB"), tmp_path, opts)
    info = runner.start()
    try:
        assert info["shared_port"] is True and info["topology"] is None and info["ground_truth"] is None
        assert len(set(info["gnmi"].values())) == 1
        host, port = info["gnmi"]["spine01"].rsplit(":", 1)
        with gNMIclient(target=(host, int(port)), insecure=True, gnmi_timeout=5) as gc:
            for name in ("leaf01", "spine01"):
                got = gc.get(target=name, path=["/interfaces/interface[name=Ethernet1]/state/oper-status"],
                             encoding="proto")
                assert got["notification"][0]["update"][0]["val"] == "UP"
    finally:
        runner.stop()
    runner.stop()  # twice is fine


def test_duration_ends_the_run_and_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    topo = generate(FabricSpec(hosts=2, leaves=1, spines=1))
    opts = RunnerOptions(tick_s=0.25, gnmi_ports="free", host_views=False, ground_truth=False, duration_s=0.5)
    runner = SimRunner(topo, preset("ring-allreduce", size="1MiB"), tmp_path / "a", opts)
    info = runner.start()
    assert runner.wait(10)  # the duration ended it
    runner.stop()
    assert runner.error is None and runner.engine is not None
    assert runner.engine.now_ns - info["start_ns"] == 500_000_000

    holder = SimRunner(topo, preset("ring-allreduce"), tmp_path / "b",
                       RunnerOptions(shared_port=0, host_views=False, ground_truth=False))
    taken = int(next(iter(holder.start()["gnmi"].values())).rsplit(":", 1)[1])
    try:
        busy = SimRunner(topo, preset("ring-allreduce"), tmp_path / "c",
                         RunnerOptions(shared_port=taken, host_views=False, ground_truth=False))
        with pytest.raises(OSError, match="cannot bind"):
            busy.start()
        assert busy.servers == [] and busy.done.is_set()
    finally:
        holder.stop()


def fabric_with_password_env(variable: str) -> Topology:
    """A 4-host fabric whose switches' gNMI password is the environment variable ``variable`` (user admin)."""
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2))
    return topo.model_copy(update={"defaults": topo.defaults.model_copy(update={
        "credentials": Credentials(username="admin", password_env=variable)})})


def test_gnmi_over_mutual_tls_with_the_topology_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``gnmi_tls`` with a client CA: a client certificate signed by it and the topology's password are
    required; the password comes from the environment variable the topology names."""
    ca, ca_key, ca_cert = make_ca(tmp_path, "ca")
    cert, key = make_server_cert(tmp_path, ca_key, ca_cert)
    client_cert, client_key = make_client_cert(tmp_path, ca_key, ca_cert)
    monkeypatch.setenv("T_SIM_GNMI_PW", "sim-pass-1")
    topo = fabric_with_password_env("T_SIM_GNMI_PW")
    options = RunnerOptions(tick_s=0.25, gnmi_ports="free", duration_s=30, ground_truth=False, host_views=False,
                            gnmi_tls=TlsFiles(cert, key, ca_file=ca))
    root = ca.read_bytes()
    with_cert = grpc.ssl_channel_credentials(root, client_key.read_bytes(), client_cert.read_bytes())
    cases = {"good": (with_cert, "sim-pass-1"), "no client certificate": (grpc.ssl_channel_credentials(root),
             "sim-pass-1"), "wrong password": (with_cert, "nope")}
    got: dict[str, str] = {}
    with SimRunner(topo, preset("ring-allreduce", size="16MiB", channels=1), tmp_path / "run", options) as runner:
        for case, (creds, password) in cases.items():
            with grpc.secure_channel(runner.endpoints["leaf01"], creds,
                                     options=[("grpc.ssl_target_name_override", "switch.test")]) as channel:
                try:
                    gNMIStub(channel).Capabilities(CapabilityRequest(), timeout=5,
                                                   metadata=(("username", "admin"), ("password", password)))
                    got[case] = "OK"
                except grpc.RpcError as e:
                    got[case] = e.code().name  # type: ignore[attr-defined]
    assert got == {"good": "OK", "no client certificate": "UNAVAILABLE", "wrong password": "UNAUTHENTICATED"}


def test_a_missing_topology_password_is_logged_not_silent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("T_SIM_GNMI_UNSET", raising=False)
    topo = fabric_with_password_env("T_SIM_GNMI_UNSET")
    options = RunnerOptions(tick_s=0.25, gnmi_ports="free", duration_s=30, ground_truth=False, host_views=False)
    caplog.set_level(logging.WARNING, logger="flowtracer.sim")
    with SimRunner(topo, preset("ring-allreduce", size="16MiB", channels=1), tmp_path / "run", options):
        pass
    assert ("topology defaults: credentials.password_env: environment variable T_SIM_GNMI_UNSET is not set; "
            "those simulated switches check no password") in caplog.text


def test_host_states_keep_only_unwritten_nccl_lines(tmp_path: Path) -> None:
    """A long run must not keep every NCCL line in memory (issue 27): the runner hands each tick's lines to the
    view writer and forgets them; the log file still gets every line once, in order."""
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2))
    wl = preset("ring-allreduce", size="16MiB", channels=2, compute_gap="20ms")
    opts = RunnerOptions(tick_s=0.25, gnmi_ports="free", ground_truth=False, duration_s=3.0)
    runner = SimRunner(topo, wl, tmp_path, opts)
    runner.start()
    assert runner.wait(20)  # 12 ticks
    runner.stop()
    assert runner.error is None and runner.engine is not None
    for name, hs in runner.engine.host_states.items():
        lines = (tmp_path / "hosts" / name / "nccl.log").read_text().splitlines()
        ops = [int(line.split("opCount ")[1].split()[0], 16) for line in lines if "AllReduce: opCount" in line]
        assert len(ops) > 12 and ops == sorted(ops), name  # every collective logged once, in order
        assert hs.nccl_log_dropped + len(hs.nccl_log) >= len(lines)
        assert len(hs.nccl_log) < len(lines) / 4, f"{name} keeps {len(hs.nccl_log)} of {len(lines)} lines"
