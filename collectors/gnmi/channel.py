"""Connection set-up for one target: gRPC channel (TLS, keepalive), credentials, SubscribeRequest.

We use ``grpc.aio`` with pygnmi's generated gNMI stubs rather than ``pygnmi.gNMIclient``
sessions, because for a collector of hundreds of targets pygnmi gets in the way: its client is
synchronous with a thread per subscription, ``connect()`` blocks, its ``close()`` only
half-closes the call (the switch keeps streaming), the first ``next()`` blocks until
sync_response (no liveness timeout possible), it fetches the server certificate and trusts it
when no CA is given, and its parser is slow (see decode.py). From pygnmi we keep the gNMI
protobuf/gRPC bindings, the XPath parser (paths.py) and its skip-verify recipe (trust the
certificate the server presents, override the name), re-done here without blocking the loop.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field

import grpc
from cryptography import x509
from cryptography.x509.oid import ExtensionOID, NameOID
from pygnmi.spec.v080.gnmi_pb2 import Encoding as PbEncoding
from pygnmi.spec.v080.gnmi_pb2 import GetRequest, Path, SubscribeRequest, SubscriptionList, SubscriptionMode

from flowtracer.collectors.gnmi.config import ConfigError, Encoding, Gnmi, Mode, Subscription, Target, TargetMode
from flowtracer.collectors.gnmi.counters.paths import format_path, parse_path
from flowtracer.fabric.platform_profiles import CANONICAL, load_profile

_PB_ENCODING = {Encoding.PROTO: PbEncoding.PROTO, Encoding.JSON_IETF: PbEncoding.JSON_IETF,
                Encoding.JSON: PbEncoding.JSON}
_PB_MODE = {Mode.SAMPLE: SubscriptionMode.SAMPLE, Mode.ON_CHANGE: SubscriptionMode.ON_CHANGE,
            Mode.TARGET_DEFINED: SubscriptionMode.TARGET_DEFINED}
#: Capabilities names of our encodings (gNMI Encoding enum names, lower case).
ENCODING_NAMES = {Encoding.PROTO: "PROTO", Encoding.JSON_IETF: "JSON_IETF", Encoding.JSON: "JSON"}


#: The default subscription of OpenConfig's unified AFT counters subtree (openconfig-aft 3.x).
AFT_COUNTERS = "aft-counters"


def subscriptions_for(target: Target, gnmi: Gnmi) -> list[Subscription]:
    """The subscriptions a target gets (all, or the ones it names), on its platform's paths.

    On a platform other than OpenConfig, a subscription named as one of flowtracer's groups (``interface-counters``,
    ``oper-status``, ... : the defaults' names) becomes one subscription per path the profile has for the group,
    with the same mode and intervals; none when the platform has nothing for it. Other subscriptions are kept as
    written."""
    subs = [s for s in gnmi.all_subscriptions if not target.subscriptions or s.name in target.subscriptions]
    profile = load_profile(target.platform)
    if profile.is_openconfig:
        return subs
    groups = {c.group for c in CANONICAL.values()} - {""}
    out: list[Subscription] = []
    for s in subs:
        if s.name == AFT_COUNTERS:
            continue  # OpenConfig's newer AFT counter tree; a profile maps next-hop counters under next-hop-counters
        if s.name not in groups:
            out.append(s)
            continue
        out += [s.model_copy(update={"path": p}) for p in profile.group_paths(s.name)]
    return out


def gnmi_for(target: Target, gnmi: Gnmi) -> Gnmi:
    """The gNMI settings for ``target``: its platform's encoding when it is not OpenConfig (``gnmi.encoding``
    then applies to OpenConfig targets only), and its own ``timeout`` as the connect timeout."""
    profile = load_profile(target.platform)
    update: dict[str, object] = {} if profile.is_openconfig else {"encoding": Encoding(profile.encoding)}
    if target.timeout is not None:  # the target's own (gnmic's per-target timeout)
        update["connect_timeout"] = target.timeout
    return gnmi.model_copy(update=update) if update else gnmi


def target_addressed(subs: list[Subscription], target: Target) -> tuple[Path | None, list[Subscription],
                                                                      list[Subscription]]:
    """(prefix, subscriptions, dropped) for ``target.addressing``: as they are for ``origin``; for ``target``, the DB
    paths of one DB (COUNTERS_DB when subscribed) re-addressed as sonic-gnmi's older form wants them: prefix
    target ``COUNTERS_DB``, path ``/COUNTERS/Ethernet*`` without origin or namespace (sonic-net/SONiC
    ``doc/system-telemetry/grpc_telemetry.md``). A Subscribe names one prefix target, so the other DBs' paths
    (APPL_DB's oper-status and speed) and non-DB paths are ``dropped``, for the caller to say so."""
    if target.addressing != "target":
        return None, subs, []
    db_target = load_profile(target.platform).db_target
    if db_target is None:  # Target's validator refuses this; kept for callers building targets by hand
        raise ConfigError(f"target {target.name}: platform {target.platform} has no target-addressed form")
    origin, namespace = db_target
    by_db: dict[str, list[tuple[Subscription, Subscription]]] = {}  # DB -> (as written, re-addressed)
    other: list[Subscription] = []
    for s in subs:
        p = parse_path(s.path)
        if p.origin == origin and len(p.elem) > 2 and p.elem[1].name == namespace and not p.elem[0].key:
            rest = format_path(Path(elem=p.elem[2:]))
            by_db.setdefault(p.elem[0].name, []).append((s, s.model_copy(update={"path": rest})))
        else:
            other.append(s)
    db = "COUNTERS_DB" if "COUNTERS_DB" in by_db else next(iter(by_db), None)
    if db is None:
        raise ConfigError(f"target {target.name}: addressing: target, but no subscription reads a DB path")
    kept = [new for _, new in by_db.pop(db)]
    return Path(target=db), kept, [old for v in by_db.values() for old, _ in v] + other


def _path(s: Subscription, gnmi: Gnmi, prefix: Path | None = None) -> Path:
    """The subscription's path; its own origin is kept, else ``gnmi.origin`` is set (not under a prefix target,
    whose paths are addressed by it)."""
    path = parse_path(s.path)
    if gnmi.origin and not path.origin and prefix is None:
        path.origin = gnmi.origin
    return path


def subscribe_request(subs: list[Subscription], gnmi: Gnmi, mode: TargetMode = TargetMode.STREAM,
                      prefix: Path | None = None) -> SubscribeRequest:
    """A STREAM, POLL or ONCE SubscribeRequest for ``subs`` (intervals in ns as gNMI wants them). POLL and ONCE
    carry no per-subscription mode or interval (gNMI 3.5.1.5.1: the collector drives them)."""
    if mode is TargetMode.GET:
        raise ValueError("a Get target has no SubscribeRequest")
    list_mode = {TargetMode.STREAM: SubscriptionList.STREAM, TargetMode.POLL: SubscriptionList.POLL,
                 TargetMode.ONCE: SubscriptionList.ONCE}[mode]
    sl = SubscriptionList(mode=list_mode, encoding=_PB_ENCODING[gnmi.encoding],
                          updates_only=gnmi.updates_only and mode is TargetMode.STREAM, prefix=prefix)
    for s in subs:
        if mode is not TargetMode.STREAM:
            sl.subscription.add(path=_path(s, gnmi, prefix))
            continue
        sl.subscription.add(
            path=_path(s, gnmi, prefix), mode=_PB_MODE[s.mode],
            sample_interval=s.sample_interval_ns if s.mode is not Mode.ON_CHANGE else 0,
            heartbeat_interval=s.heartbeat_interval_ns, suppress_redundant=s.suppress_redundant)
    return SubscribeRequest(subscribe=sl)


def get_request(subs: list[Subscription], gnmi: Gnmi, prefix: Path | None = None) -> GetRequest:
    """One GetRequest for every path of ``subs`` (type ALL: the counters are state, some boxes file them
    under OPERATIONAL)."""
    return GetRequest(prefix=prefix, path=[_path(s, gnmi, prefix) for s in subs], encoding=_PB_ENCODING[gnmi.encoding])


def channel_options(gnmi: Gnmi) -> list[tuple[str, int | str]]:
    """gRPC channel options: keepalive that never provokes too_many_pings, message size."""
    return [
        ("grpc.keepalive_time_ms", int(gnmi.keepalive_time * 1000)),
        ("grpc.keepalive_timeout_ms", int(gnmi.keepalive_timeout * 1000)),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.max_receive_message_length", gnmi.max_receive_message_bytes),
        # We reconnect ourselves, with our backoff: no hidden transparent retries.
        ("grpc.enable_retries", 0),
        ("grpc.initial_reconnect_backoff_ms", 1000),
        ("grpc.max_reconnect_backoff_ms", 10_000),
    ]


@dataclass(frozen=True)
class Connection:
    """Everything needed to open a channel; built once per attempt (files are re-read)."""

    address: str
    options: list[tuple[str, int | str]]
    credentials: grpc.ChannelCredentials | None
    metadata: tuple[tuple[str, str], ...] = field(repr=False)  # holds the password

    def open(self) -> grpc.aio.Channel:
        if self.credentials is None:
            return grpc.aio.insecure_channel(self.address, options=self.options)
        return grpc.aio.secure_channel(self.address, self.credentials, options=self.options)


def _read(path: object, what: str) -> bytes:
    try:
        with open(str(path), "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"tls.{what}: cannot read {path}: {e.strerror}") from None


def _names_in_cert(pem: bytes) -> list[str]:
    cert = x509.load_pem_x509_certificate(pem)
    names: list[str] = []
    try:
        san = cert.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME).value
        names += [str(n) for n in san.get_values_for_type(x509.DNSName)]  # type: ignore[attr-defined]
        names += [str(n) for n in san.get_values_for_type(x509.IPAddress)]  # type: ignore[attr-defined]
    except x509.ExtensionNotFound:
        pass
    names += [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return names


async def connection_for(target: Target, gnmi: Gnmi) -> Connection:
    """Resolve TLS files and secrets for one attempt. ConfigError names what is wrong."""
    address = f"[{target.address}]:{target.port}" if ":" in target.address else f"{target.address}:{target.port}"
    options = channel_options(gnmi)
    creds: grpc.ChannelCredentials | None = None
    tls = target.tls
    if tls.enabled:
        root = _read(tls.ca_file, "ca_file") if tls.ca_file else None
        key = _read(tls.key_file, "key_file") if tls.key_file else None
        chain = _read(tls.cert_file, "cert_file") if tls.cert_file else None
        if (key is None) != (chain is None):
            raise ConfigError("tls: cert_file and key_file go together (client certificate)")
        server_name = tls.server_name
        if tls.skip_verify:
            # As pygnmi does: trust whatever certificate the server presents, and accept its name.
            # For labs only; logged by the caller.
            try:
                pem = await asyncio.to_thread(
                    ssl.get_server_certificate, (target.address, target.port), timeout=gnmi.connect_timeout)
            except OSError as e:
                raise ConnectionError(f"cannot fetch the server certificate for skip_verify: {e}") from None
            root = pem.encode()
            names = _names_in_cert(root)
            server_name = server_name or (names[0] if names else "")
        creds = grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=chain)
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
    metadata: tuple[tuple[str, str], ...] = ()
    cred = target.credentials.resolve()
    if cred is not None:
        user, password = cred
        metadata = (("username", user), ("password", password.get_secret_value()))
    return Connection(address, options, creds, metadata)
