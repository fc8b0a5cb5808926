"""Golden tests over real gnmic target files (tests/fixtures/real/gnmic/, sources in its SOURCES.md): the targets
each must give, written from reading the file and gnmic's documentation of its keys."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flowtracer.collectors.gnmi.config import ConfigError, Target
from flowtracer.collectors.gnmi.discovery.targets import endpoint, load_targets, parse_targets_file

REAL = Path(__file__).resolve().parents[3] / "fixtures" / "real" / "gnmic"


def by_name(targets: list[Target]) -> dict[str, Target]:
    return {t.name: t for t in targets}


def test_targets_file_at_the_top_level(tmp_path: Path) -> None:
    f = shutil.copy(REAL / "file_discovery_targets.yaml", tmp_path / "targets.yaml")
    got = load_targets(Path(f))
    assert got.warnings == []
    t = by_name(got.targets)
    assert sorted(t) == ["10.10.10.10", "10.10.10.11", "10.10.10.12", "10.10.10.13", "10.10.10.14"]
    assert t["10.10.10.10"].address == "10.10.10.10" and t["10.10.10.10"].port == 57400
    assert t["10.10.10.10"].tls.enabled is False  # insecure: true
    assert t["10.10.10.10"].credentials.username == "admin"
    assert t["10.10.10.11"].tls.enabled is True  # gnmic's default without insecure: TLS
    assert t["10.10.10.11"].credentials.username == "admin"
    assert t["10.10.10.12"].credentials.resolve() is None and t["10.10.10.12"].tls.enabled is True


def test_targets_by_name_with_no_options() -> None:
    got = load_targets(REAL / "clab_loaders_targets.yaml")
    assert [(t.name, t.address, t.port, t.tls.enabled) for t in got.targets] == [
        ("clab-loaders-srl1", "clab-loaders-srl1", 57400, True), ("clab-loaders-srl3", "clab-loaders-srl3", 57400, True)]


def test_gnmic_json_with_the_docs_trailing_comma_is_one_clear_error() -> None:
    with pytest.raises(ConfigError) as e:
        load_targets(REAL / "file_discovery_targets.json")
    msg = str(e.value)
    # the comma ends line 7; JSON reports where it then wanted a name: the "}" of line 8
    assert "file_discovery_targets.json: not valid JSON" in msg and "line 8 column 5" in msg and "\n" not in msg


def test_gnmic_config_names_the_tls_files_it_lacks() -> None:
    """gnmic's config.yaml points every TLS target at /path/to/...: files of its author's machine."""
    with pytest.raises(ConfigError) as e:
        load_targets(REAL / "gnmic_config.yaml")
    msg = str(e.value)
    assert "targets.172.17.0.100" in msg and "no such file: /path/to/" in msg and "sros" not in msg


def test_targets_option_example_names_the_target_and_file() -> None:
    with pytest.raises(ConfigError) as e:
        load_targets(REAL / "targets_option.yaml")
    msg = str(e.value)
    assert "targets.router2.lab.net:57000" in msg and "no such file: /path/file" in msg and "gnmi_pass" not in msg


def _with_pems(tmp_path: Path, name: str, paths: tuple[str, ...]) -> Path:
    """The sample with only its TLS file paths pointed at files that exist here (the rest verbatim)."""
    text = (REAL / name).read_text()
    for p in paths:
        local = tmp_path / Path(p).name
        local.write_text("-----BEGIN CERTIFICATE-----\n")
        text = text.replace(p, str(local))
    out = tmp_path / name
    out.write_text(text)
    return out


def test_gnmic_config_maps_every_key_flowtracer_has_and_names_the_rest(tmp_path: Path) -> None:
    f = _with_pems(tmp_path, "gnmic_config.yaml", ("/path/to/client.key", "/path/to/client.crt", "/path/to/ca.crt",
                                                    "/path/file1", "/path/file2"))
    got = load_targets(f)
    t = by_name(got.targets)
    assert sorted(t) == ["172.17.0.100", "172.17.0.101", "172.17.0.102:57000", "172.17.0.103"]
    a = t["172.17.0.100"]  # timeout 2s; the rest from the top: admin/sros, port 57400, skip-verify, tls-*
    assert (a.address, a.port, a.timeout) == ("172.17.0.100", 57400, 2.0)
    assert a.tls.enabled and a.tls.skip_verify and a.tls.ca_file == tmp_path / "ca.crt"
    assert a.tls.cert_file == tmp_path / "client.crt" and a.tls.key_file == tmp_path / "client.key"
    assert a.credentials.resolve() == ("admin", a.credentials.resolve()[1])  # type: ignore[index]
    assert a.credentials.resolve()[1].get_secret_value() == "sros"  # type: ignore[index]
    b = t["172.17.0.101"]  # its own sros/sros, insecure: plaintext, no TLS files
    assert b.tls.enabled is False and b.tls.ca_file is None and b.timeout == 5.0
    assert b.credentials.resolve()[0] == "sros"  # type: ignore[index]
    c = t["172.17.0.102:57000"]  # its own port, password and TLS pair
    assert (c.address, c.port) == ("172.17.0.102", 57000)
    assert c.tls.key_file == tmp_path / "file1" and c.tls.cert_file == tmp_path / "file2"
    assert c.credentials.resolve()[1].get_secret_value() == "sros123"  # type: ignore[index]
    d = t["172.17.0.103"]  # nothing of its own
    assert d.credentials.resolve()[1].get_secret_value() == "sros" and d.tls.skip_verify  # type: ignore[index]
    (w,) = got.warnings
    assert "subscriptions (top level, targets.172.17.0.100, targets.172.17.0.101)" in w
    assert "outputs (top level, targets.172.17.0.100, targets.172.17.0.101)" in w
    for secret in ("sros123", ": sros", "gnmi_pass"):
        assert secret not in w


def test_a_password_in_the_file_is_referenced_never_copied(tmp_path: Path) -> None:
    f = _with_pems(tmp_path, "targets_option.yaml", ("/path/file1", "/path/file2"))
    t = by_name(load_targets(f).targets)
    r1 = t["router1.lab.net"]
    assert r1.credentials.password_file == f and r1.credentials.password_key == ("targets", "router1.lab.net",
                                                                                  "password")
    assert r1.credentials.resolve()[1].get_secret_value() == "gnmi_pass"  # type: ignore[index]
    assert r1.timeout == 2.0 and r1.tls.enabled
    for shown in (repr(r1), str(endpoint(r1)), r1.model_dump_json()):
        assert "gnmi_pass" not in shown
    f.write_text(f.read_text().replace("password: gnmi_pass\n  router2", "passwd: x\n  router2"))
    with pytest.raises(ValueError, match=r"password_key: .*targets\.router1\.lab\.net\.password: no such key"):
        r1.credentials.resolve()
    # YAML would read an unquoted 0123 as 83 and yes as True: the password written is lost, so it is refused
    for unquoted, kind in (("0123", "int"), ("yes", "bool"), ("[a]", None)):
        f.write_text(f.read_text().replace("passwd: x\n  router2", f"password: {unquoted}\n  router2", 1)
                     .replace("password: 0123\n", f"password: {unquoted}\n").replace("password: yes\n",
                                                                                 f"password: {unquoted}\n"))
        with pytest.raises(ValueError, match=f"password: not a {'string' if kind else 'password'}") as e:
            r1.credentials.resolve()
        assert unquoted not in str(e.value) and (kind is None or f"as a {kind}" in str(e.value))


def test_gnmic_address_option_lists_targets_sharing_the_top_level() -> None:
    """targets.md's "address option" (its two routers), with a username for all."""
    got = parse_targets_file('address:\n  - "router1.lab.net:57400"\n  - "router2.lab.net:57400"\nusername: ro\n',
                             "gnmic.yaml")
    assert [(t.name, t.address, t.port, t.credentials.username) for t in got.targets] == [
        ("router1.lab.net:57400", "router1.lab.net", 57400, "ro"), ("router2.lab.net:57400", "router2.lab.net", 57400, "ro")]


@pytest.mark.parametrize(("text", "message"), [
    ("10.0.0.1: [a, b]", "gnmic's targets file"),
    ("targets: {leaf1: {insecure: true, bogus: 1}}", "bogus"),
    ("targets: {leaf1: {timeout: -1s}}", "timeout"),
    ("- a\n- b", "expected a mapping"),
])
def test_bad_gnmic_files_are_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_targets_file(text, "t.yaml")
    assert message in str(e.value) and "\n" not in str(e.value) and "Traceback" not in str(e.value)


def test_every_gnmic_sample_is_cited() -> None:
    sources = (REAL / "SOURCES.md").read_text()
    files = [f.name for f in REAL.iterdir() if f.name != "SOURCES.md"]
    assert len(files) >= 3 and all(f"`{n}`" in sources for n in files)
