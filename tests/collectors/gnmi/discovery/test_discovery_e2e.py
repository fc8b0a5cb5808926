"""``topology discover`` against a running simulator (real gNMI servers, 16 hosts), then ``topology diff``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from discovery_sim import run, served_fabric
from waiting import wait_for

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.runner import SimRunner
from flowtracer.sim.switches.server import GnmiServer

PASSWORD_ENV = "FT_TEST_DISCOVERY_PASSWORD"
IN_CLEAR = "username/password sent over plaintext gRPC"


def besides_in_clear(err: str) -> str:
    """``err`` without the per-target warnings that a password crossed the network in clear."""
    return "".join(line for line in err.splitlines(keepends=True) if IN_CLEAR not in line)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict, SimRunner]]:
    """The default 16-host fabric, its switches asking for a username and a password (from env)."""
    mp = pytest.MonkeyPatch()
    mp.setenv(PASSWORD_ENV, "s3cret")
    try:
        with served_fabric(tmp_path_factory.mktemp("discovery"), lambda data: data["defaults"].__setitem__(
                "credentials", {"username": "ft", "password_env": PASSWORD_ENV})) as served:
            yield served
    finally:
        mp.undo()


@pytest.mark.parametrize(("encoding", "rpc"), [("proto", "get"), ("json_ietf", "get"), ("json", "get"),
                                               ("proto", "once")])
def test_discovered_fabric_is_the_generated_one(sim: tuple[Path, dict, SimRunner], tmp_path: Path,
                                                encoding: str, rpc: str) -> None:
    generated, ready, _ = sim
    targets = tmp_path / "targets.yaml"  # gnmic's form: keyed by address:port, plaintext, password from env
    targets.write_text(yaml.safe_dump({
        "credentials": {"username": "ft", "password_env": PASSWORD_ENV},
        "targets": {addr: {"name": name, "insecure": True} for name, addr in ready["gnmi"].items()}}))
    out = tmp_path / "discovered.yaml"
    code, _, err = run("topology", "discover", "--targets", str(targets), "--out", str(out), "--name", "ft16",
                       "--encoding", encoding, "--rpc", rpc)
    assert code == 0, err
    assert "discovered 6 switches, 8 links, 16 hosts, 4 ECMP groups" in err
    # The password crossed the network in clear (insecure: true): said once per switch, the secret never shown.
    warned = [line for line in err.splitlines() if line.startswith("warning:")]
    assert sorted(warned) == sorted(f"warning: target {n}: username/password sent over plaintext gRPC (insecure / "
                                    "tls.enabled false): anyone on the path can read them; use TLS outside a lab"
                                    for n in ready["gnmi"]), err
    assert os.environ[PASSWORD_ENV] not in err
    assert run("topology", "check", str(out))[0] == 0
    assert run("topology", "diff", str(generated), str(out)) == (0, "", "")

    # The same file, edited: each difference is one line, and diff exits 1.
    data = yaml.safe_load(out.read_text())
    for g in data["ecmp_groups"]:
        if g["switch"] == "leaf02":
            g["members"]["Ethernet5"] = 3
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(data))
    assert run("topology", "diff", str(out), str(edited)) == (
        1, "ecmp leaf02 toward leaf01, leaf03, leaf04: next hop Ethernet5 weight 1 in A, 3 in B\n", "")


def test_ready_json_and_a_wrong_password(sim: tuple[Path, dict, SimRunner], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _, ready, _ = sim
    ready_file = tmp_path / "ready.json"
    ready_file.write_text(json.dumps(ready))
    # The ready JSON has no credentials: the switches refuse, and discovery says which one in one line.
    code, out, err = run("topology", "discover", "--targets", str(ready_file))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "target leaf01" in err and "UNAUTHENTICATED" in err
    targets = tmp_path / "targets.yaml"
    monkeypatch.setenv("FT_WRONG", "nope")
    targets.write_text(yaml.safe_dump({"targets": [
        {"name": n, "address": a.rsplit(":", 1)[0], "port": int(a.rsplit(":", 1)[1]),
         "credentials": {"username": "ft", "password_env": "FT_WRONG"}} for n, a in ready["gnmi"].items()]}))
    code, _, err = run("topology", "discover", "--targets", str(targets))
    assert code == 1 and "UNAUTHENTICATED" in err and besides_in_clear(err).count("\n") == 1


def test_a_cable_that_goes_down_is_seen(sim: tuple[Path, dict, SimRunner], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The switches stop hearing each other over LLDP and leaf02 withdraws the next hop: diff names both."""
    generated, ready, runner = sim
    assert runner.engine is not None
    targets = tmp_path / "targets.yaml"
    targets.write_text(yaml.safe_dump({
        "credentials": {"username": "ft", "password_env": PASSWORD_ENV},
        "targets": [{"name": n, "address": a.rsplit(":", 1)[0], "port": int(a.rsplit(":", 1)[1])}
                    for n, a in ready["gnmi"].items()]}))
    out = tmp_path / "discovered.yaml"
    engine = runner.engine
    engine.inject("link_down", "leaf02:Ethernet6")
    t0 = engine.now_ns
    try:
        wait_for(lambda: engine.now_ns > t0, 10, "a simulator tick after the fault")  # switches publish per tick
        assert run("topology", "discover", "--targets", str(targets), "--out", str(out))[0] == 0
    finally:
        engine.inject("link_up", "leaf02:Ethernet6")
        t1 = engine.now_ns
        wait_for(lambda: engine.now_ns > t1, 10, "a simulator tick after the repair")
    assert run("topology", "diff", str(generated), str(out)) == (1, (
        "ecmp leaf02 toward leaf01, leaf03, leaf04: next hop Ethernet6 only in A\n"
        "link leaf02:Ethernet6 - spine02:Ethernet2: only in A\n"), "")


def test_a_switch_without_get_is_read_with_once(sim: tuple[Path, dict, SimRunner], tmp_path: Path) -> None:
    generated, ready, runner = sim
    assert runner.engine is not None
    no_get = GnmiServer({"leaf01": runner.engine.switch_states["leaf01"]}, credentials=("ft", "s3cret"),
                        serve_get=False)
    with no_get:
        gnmi = {**ready["gnmi"], "leaf01": f"127.0.0.1:{no_get.port}"}
        targets = tmp_path / "targets.yaml"
        targets.write_text(yaml.safe_dump({
            "credentials": {"username": "ft", "password_env": PASSWORD_ENV},
            "targets": {a: {"name": n, "insecure": True} for n, a in gnmi.items()}}))
        out = tmp_path / "discovered.yaml"
        code, _, err = run("topology", "discover", "--targets", str(targets), "--out", str(out))
    assert code == 0 and besides_in_clear(err).startswith("warning: leaf01: Get is not implemented: read with Subscribe ONCE\n")
    assert run("topology", "diff", str(generated), str(out)) == (0, "", "")


@pytest.mark.parametrize(("text", "message"), [
    ("targets: [{name: leaf01}]", "targets.yaml:1: targets[0]: address: missing required field 'address'"),
    ("targets: [{name: a, address: 127.0.0.1, tls: {enabled: true, ca_file: /nonexistent.pem}}]", "no such file"),
    ("targets: {}\nextra: 1", "unknown field(s) extra"),
    ('{"ready": true}', "ready JSON with a 'gnmi' mapping"),
])
def test_bad_targets_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "targets.yaml"
    f.write_text(text)
    code, _, err = run("topology", "discover", "--targets", str(f))
    assert code == 2 and message in err and err.count("\n") == 1


def test_diff_of_a_bad_file_is_one_line(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(generate(FabricSpec(hosts=2, leaves=2, spines=1)).to_yaml())
    code, out, err = run("topology", "diff", str(good), str(tmp_path / "missing.yaml"))
    assert (code, out) == (2, "") and "missing.yaml: no such file" in err and err.count("\n") == 1


def test_a_gnmic_targets_file_as_it_is(sim: tuple[Path, dict, SimRunner], tmp_path: Path) -> None:
    """gnmic's --targets-file form, gnmic's keys only, the password written in it: discovery reads the switches
    (which ask for it), names the unused keys in one warning, and the topology refers to the file, not the secret."""
    generated, ready, _ = sim
    targets = tmp_path / "targets.yaml"
    targets.write_text(yaml.safe_dump({addr: {"name": name, "username": "ft", "password": "s3cret", "insecure": True,
                                              "outputs": ["prom"], "encoding": "proto"}
                                       for name, addr in ready["gnmi"].items()}))
    out = tmp_path / "discovered.yaml"
    code, _, err = run("topology", "discover", "--targets", str(targets), "--out", str(out), "--name", "ft16")
    assert code == 0, err
    assert besides_in_clear(err).count("warning:") == 1 and err.count(IN_CLEAR) == 6 and "outputs (" in err and "encoding (" in err and "s3cret" not in err
    assert run("topology", "diff", str(generated), str(out)) == (0, "", "")
    text = out.read_text()
    assert "s3cret" not in text and str(targets) in text and "password_key" in text
