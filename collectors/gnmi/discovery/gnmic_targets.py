"""gnmic's target keys -> flowtracer's ``Target`` fields (pure).

gnmic (openconfig/gnmic ``docs/user_guide/targets/targets.md``, "target configuration options") lets a target,
or the top of its configuration file, set ``address``, ``username``, ``password``, ``timeout``, ``insecure``,
``skip-verify``, ``tls-ca``, ``tls-cert``, ``tls-key``, ``tls-server-name`` and about thirty more. Those with a
meaning in flowtracer are mapped:

=================  ======================================================================================
gnmic              flowtracer
=================  ======================================================================================
``address``        ``address`` and ``port`` (``host:port``, ``[v6]:port``; a comma-separated list: the first)
``port``           ``port`` of a target whose address has none (top level only, as gnmic's ``--port``)
``username``       ``credentials.username``
``password``       ``credentials.password_file`` = this file, ``password_key`` = where it is in it: read when
                   a connection needs it, never copied into the topology, a log or a repr
``insecure``       ``tls.enabled: false`` (plaintext gRPC); without it gnmic uses TLS, and so do we
``skip-verify``    ``tls.skip_verify`` (TLS, the certificate not verified; the collector warns)
``tls-ca``         ``tls.ca_file``;  ``tls-cert`` / ``tls-key``: ``tls.cert_file`` / ``tls.key_file``
``tls-server-name`` ``tls.server_name``
``timeout``        ``timeout`` (a duration: ``2s``)
=================  ======================================================================================

Every other gnmic key (``subscriptions``, ``outputs``, ``encoding``, ``token``, ``gzip``, ``proxy``, ...) is not
used; ``unused`` collects them so the caller names them all in one warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: gnmic target keys flowtracer maps (see the table above); the rest of KNOWN are named as unused.
MAPPED = frozenset({"name", "address", "port", "username", "password", "insecure", "skip-verify", "tls-ca",
                    "tls-cert", "tls-key", "tls-server-name", "timeout"})
#: Every key of gnmic's target options (targets.md) and of the top level of its configuration file
#: (global flags and sections: configuration_file.md, global_flags.md).
KNOWN = MAPPED | frozenset({
    "token", "tls-max-version", "tls-min-version", "tls-version", "log-tls-secret", "subscriptions", "encoding",
    "outputs", "buffer-size", "retry-timer", "retry", "tags", "event-tags", "proto-files", "proto-dirs",
    "proto-file", "proto-dir", "gzip", "proxy", "proxy-from-env", "cipher-suites", "tcp-keepalive",
    "grpc-keepalive", "grpc-read-buffer-size", "grpc-write-buffer-size", "grpc-conn-window-size",
    "grpc-window-size", "grpc-static-conn-window-size", "grpc-static-stream-window-size", "metadata",
    "debug", "format", "log", "log-file", "log-max-size", "log-max-backups", "log-compress", "no-prefix",
    "max-msg-size", "prometheus-address", "print-request", "calculate-latency", "cluster-name",
    "instance-name", "api", "api-server", "inputs", "processors", "loader", "clustering", "gnmi-server",
    "actions", "tunnel-server", "locker", "targets-file", "file", "dir", "exclude", "use-tunnel-server",
    "auth-scheme",
})
#: flowtracer's own fields of a target (its ``Target`` model), accepted as they are.
OWN = frozenset({"name", "address", "port", "tls", "credentials", "counter_bits", "subscriptions", "mode",
                 "interval", "platform", "timeout", "addressing"})


@dataclass
class Unused:
    """gnmic keys not used, with the targets (or ``top level``) that set them, in first-seen order."""

    where: dict[str, list[str]] = field(default_factory=dict)

    def add(self, key: str, place: str) -> None:
        places = self.where.setdefault(key, [])
        if place not in places:
            places.append(place)

    def warning(self, source: str) -> str | None:
        """One line naming every unused key, or None."""
        if not self.where:
            return None
        parts = []
        for key, places in self.where.items():
            shown = ", ".join(places[:3]) + (f" and {len(places) - 3} more" if len(places) > 3 else "")
            parts.append(f"{key} ({shown})")
        return (f"{source}: gnmic key(s) flowtracer does not use, ignored: {'; '.join(parts)} "
                "(mapped: address, port, username, password, insecure, skip-verify, tls-ca/cert/key, "
                "tls-server-name, timeout)")


def split_address(address: str) -> tuple[str, int | None]:
    """``host:port``, ``[v6]:port`` or a bare host / IPv6 address."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    host, sep, port = address.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host, int(port)
    return address, None


def unused_top_level(defaults: dict[str, Any], unused: Unused) -> None:
    """Name the top-level gnmic keys flowtracer does not use (``subscriptions``, ``outputs``, ``loader``, ...)."""
    for k in defaults:
        if k in KNOWN and k not in MAPPED:
            unused.add(k, "top level")


def to_target(entry: dict[str, Any], defaults: dict[str, Any], key_path: tuple[str, ...],
              default_path: tuple[str, ...], source: Path, place: str, unused: Unused,
              notes: list[str]) -> dict[str, Any]:
    """The ``Target`` fields of one gnmic-style entry (``defaults``: the file's top-level gnmic keys, which a
    target inherits when it does not set them, as gnmic does). ``key_path`` / ``default_path``: where the
    entry's / the top level's keys are in the file (for ``password_key``). Keys that are neither gnmic's nor
    flowtracer's stay in the result, so that the model names them."""
    out: dict[str, Any] = {}
    tls: dict[str, Any] = dict(entry.get("tls") or defaults.get("tls") or {})  # flowtracer's shared ones too
    cred: dict[str, Any] = dict(entry.get("credentials") or defaults.get("credentials") or {})

    def get(k: str) -> tuple[Any, tuple[str, ...]] | None:
        if k in entry:
            return entry[k], key_path
        if k in defaults:
            return defaults[k], default_path
        return None

    for k, v in entry.items():
        if k in OWN and k not in ("subscriptions", "tls", "credentials", "address", "timeout"):
            out[k] = v
        elif k not in KNOWN and k not in OWN:
            out[k] = v  # unknown to both: the model names it
        elif k in KNOWN and k not in MAPPED:
            unused.add(k, place)
    if "subscriptions" in entry:  # gnmic's subscription names are not flowtracer's
        unused.add("subscriptions", place)
    if entry.get("address") is not None:  # the target's own: a top-level address is gnmic's list of targets
        addresses = [x for x in str(entry["address"]).split(",") if x.strip()]
        if len(addresses) > 1:
            notes.append(f"{source}: {place}: address lists {len(addresses)} addresses; flowtracer uses the first")
        host, port = split_address(addresses[0]) if addresses else ("", None)
        out["address"] = host
        if port is not None:
            out.setdefault("port", port)
    if (t := get("timeout")) is not None and t[0] is not None:
        out["timeout"] = t[0]
    if (u := get("username")) is not None and u[0] is not None:
        cred.setdefault("username", str(u[0]))
    if (p := get("password")) is not None and p[0] is not None:
        cred.setdefault("password_file", str(source))
        cred.setdefault("password_key", [*p[1], "password"])
    if cred:
        out["credentials"] = cred
    insecure = get("insecure")
    if insecure is not None and insecure[0]:
        tls["enabled"] = False
    elif "enabled" not in tls:
        tls["enabled"] = True  # gnmic's default: TLS unless insecure
    tls_keys = (("skip-verify", "skip_verify"), ("tls-ca", "ca_file"), ("tls-cert", "cert_file"),
                ("tls-key", "key_file"), ("tls-server-name", "server_name"))
    for gk, fk in tls_keys if tls["enabled"] else ():  # gnmic ignores its TLS keys for an insecure target
        if (v := get(gk)) is not None and v[0] not in (None, False, ""):
            tls.setdefault(fk, v[0])
    out["tls"] = tls
    return out
