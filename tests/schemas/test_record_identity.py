"""Per-host keys and record signatures (schemas/record_identity.py): what a host can and cannot sign."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.schemas.record_identity import (
    HOST_HEADER,
    SIG_HEADER,
    IdentityError,
    check_named,
    host_key,
    load_key,
    sign,
    signer,
)

MASTER = bytes(range(32))
TOPIC = "flowtracer.flows.v1"


def test_a_record_signed_with_its_hosts_key_names_that_host() -> None:
    headers = sign(host_key(MASTER, "host05"), "host05", TOPIC, b"leaf01", b"batch")
    assert signer(MASTER, TOPIC, b"leaf01", b"batch", headers) == "host05"
    assert signer(MASTER, TOPIC, b"leaf01", b"batch", dict(headers)) == "host05"  # Faust may give a mapping


def test_host_keys_differ_and_do_not_reveal_each_other() -> None:
    assert host_key(MASTER, "host05") != host_key(MASTER, "host06")
    assert len(host_key(MASTER, "host05")) == 32
    assert host_key(MASTER, "host05") != host_key(bytes(32), "host05")


@pytest.mark.parametrize("change", ["claim another host", "alter value", "other topic", "other key", "tombstone"])
def test_a_host_cannot_speak_for_another_or_move_a_record(change: str) -> None:
    key = host_key(MASTER, "host05")
    headers = sign(key, "host05", TOPIC, b"leaf01", b"batch")
    topic, rkey, value = TOPIC, b"leaf01", b"batch"
    if change == "claim another host":  # host05's key, host06's name in the header
        headers = sign(key, "host06", TOPIC, b"leaf01", b"batch")
    elif change == "alter value":
        value = b"forged"
    elif change == "other topic":
        topic = "flowtracer.path-traces.v1"
    elif change == "other key":
        rkey = b"leaf02"
    else:
        value = None
    with pytest.raises(IdentityError, match="does not match"):
        signer(MASTER, topic, rkey, value, headers)


def test_unsigned_and_doubly_signed_records_are_refused() -> None:
    with pytest.raises(IdentityError, match="unsigned record"):
        signer(MASTER, TOPIC, b"k", b"v", None)
    with pytest.raises(IdentityError, match="unsigned record"):
        signer(MASTER, TOPIC, b"k", b"v", [(HOST_HEADER, b"host05")])
    good = sign(host_key(MASTER, "host05"), "host05", TOPIC, b"k", b"v")
    with pytest.raises(IdentityError, match=f"2 {SIG_HEADER} headers"):
        signer(MASTER, TOPIC, b"k", b"v", [*good, (SIG_HEADER, b"x" * 32)])


def test_the_named_host_must_be_the_signer() -> None:
    check_named("host05", "host05", "FlowBatch")
    with pytest.raises(IdentityError, match="names host 'host06' but was signed by host 'host05'"):
        check_named("host05", "host06", "FlowBatch")


def test_key_files_are_hex_of_enough_bytes_and_never_echoed(tmp_path: Path) -> None:
    path = tmp_path / "host.key"
    path.write_text(MASTER.hex() + "\n")
    assert load_key(path, "host_key_file") == MASTER
    path.write_text("ab" * 16)
    with pytest.raises(IdentityError, match="holds 16 bytes, at least 32"):
        load_key(path, "host_key_file")
    path.write_text("not hex " + "ab" * 40)
    with pytest.raises(IdentityError, match="is not hex text") as e:
        load_key(path, "host_key_file")
    assert "ab" * 40 not in str(e.value)
    with pytest.raises(IdentityError, match="cannot read"):
        load_key(tmp_path / "missing", "host_key_file")
