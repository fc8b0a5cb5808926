"""The OpenConfig leaves a simulated switch serves over gNMI, and the per-tick rows they are read from.

The served tree is a fixed set of *tables* (a keyed YANG list plus the leaves below it), e.g. the
``interface`` table is ``/interfaces/interface[name]`` with leaves such as
``state/counters/in-octets``. :func:`read_tick` copies what every table needs out of a
:class:`~flowtracer.sim.switches.state.SwitchState` under its lock, as plain tuples ("rows"), so
one tick's counters and its ``timestamp_ns`` always belong together and the copy is cheap
(no deepcopy: 64 interfaces take ~0.1 ms).

Paths follow openconfig/public:

* ``openconfig-interfaces``: ``/interfaces/interface[name]/state/{name,type,enabled,admin-status,
  oper-status,last-change}``, ``state/counters/{in,out}-{octets,pkts,unicast-pkts,discards,
  errors}`` (counter64), ``state/counters/last-clear`` (timeticks64, ns since the Unix epoch);
* ``openconfig-if-ethernet``: ``/interfaces/interface[name]/ethernet/state/port-speed``
  (identityref ``ETHERNET_SPEED``, e.g. ``SPEED_400GB``);
* ``openconfig-network-instance`` / ``openconfig-aft`` under
  ``/network-instances/network-instance[name=default]/afts``: ``next-hops/next-hop[index]`` with
  ``state/{index,ip-address}``, ``state/counters/{octets,packets}-forwarded`` (the legacy place)
  and ``interface-ref/state/interface``; ``counters/next-hops/next-hop[index]/state/{index,
  octets-forwarded,packets-forwarded}`` (the unified AFT counters subtree, openconfig-aft 3.x);
  ``next-hop-groups/next-hop-group[id]/state/id`` and
  ``next-hop-groups/next-hop-group[id]/next-hops/next-hop[index]/state/{index,weight}``;
* ``openconfig-if-ip``: ``/interfaces/interface[name]/subinterfaces/subinterface[index=0]/ipv4/addresses/
  address[ip]/state/{ip,prefix-length}`` (the port's /31 from ``fabric/addressing.py``);
* ``openconfig-lldp``: ``/lldp/interfaces/interface[name]/neighbors/neighbor[id]/state/{id,system-name,
  chassis-id,chassis-id-type,port-id,port-id-type,port-description,management-address}`` (the 0.2.x
  ``management-address`` leaf, which 1.0.0 deprecates for ``mgmt-addresses`` but devices still serve);
  a port that is down has no neighbor;
* ``openconfig-aft`` IPv4 entries: ``.../afts/ipv4-unicast/ipv4-entry[prefix]/state/{prefix,next-hop-group}``
  (``next-hop-group`` is augmented by ``openconfig-aft-network-instance``), one /32 per host NIC reached
  over an ECMP group;
* ``openconfig-qos`` (2.2.0): ``/qos/interfaces/interface[interface-id]/output/queues/queue[name]/state/{name,
  transmit-pkts,transmit-octets,dropped-pkts,dropped-octets,ecn-marked-pkts,ecn-marked-octets,max-queue-len}``;
* per-priority PFC, which OpenConfig lacks, in SR Linux's layout (``srl_nokia-qos``):
  ``/qos/interfaces/interface[interface-id]/pfc/statistics/pfc-priority[index]/{index,pfc-pause-frames-received,
  pfc-pause-frames-generated}``.

Queue and PFC rows exist only for what ``SwitchState.queues`` / ``.pfc`` hold: empty unless set (by a test, or by
the congestion model while it is on, docs/congestion.md: queues "0".."7", priorities 0..7).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from enum import Enum

from flowtracer.schemas.openconfig import LLDP_NEIGHBOR_STATE
from flowtracer.sim.switches.state import INTERFACE_COUNTERS, PFC_COUNTERS, QUEUE_COUNTERS, SwitchState


class LeafType(Enum):
    """YANG base types as far as encoding is concerned (RFC 7951 quotes 64-bit integers)."""

    UINT64 = "uint64"  # counter64, timeticks64, uint64 keys
    UINT = "uint"  # uint8..uint32: a bare JSON number (RFC 7951 quotes only 64-bit integers)
    STRING = "string"
    ENUM = "enumeration"
    IDENTITY = "identityref"
    BOOL = "boolean"


@dataclass(frozen=True)
class Leaf:
    """One served leaf: its path below its table's list entry and where its value sits in a row."""

    path: tuple[str, ...]
    column: int
    type: LeafType
    #: YANG modules that define the leaf (``use_models`` keeps it when any of them is asked for).
    models: tuple[str, ...]
    #: Counters change every tick: TARGET_DEFINED samples them; everything else is sent on change.
    sampled: bool = False
    #: Module that defines the identities of an identityref (JSON_IETF qualifies the value with it).
    identity_module: str = ""
    #: A platform's value format (fabric/platform_formats.py FORMATS): the row's value is converted on encoding.
    format: str = ""


@dataclass(frozen=True)
class EntityElem:
    """One element of a table's entity path: a container, or a list with one key.

    ``fixed`` pins the key to one value (there is only the ``default`` network instance). An empty ``name`` is an
    element whose name is the value of ``key`` (SONiC's ``COUNTERS/Ethernet0``).
    """

    name: str
    key: str | None = None
    fixed: str | None = None


@dataclass(frozen=True)
class Table:
    """A keyed list and its leaves. Rows are keyed by the tuple of key values (strings, path order)."""

    name: str
    #: Which row set of a :class:`Tick` feeds the table (two tables show the same next hops).
    source: str
    entity: tuple[EntityElem, ...]
    leaves: tuple[Leaf, ...]
    #: Key names whose values are unsigned integers (canonicalised as such when matching).
    uint_keys: frozenset[str] = frozenset()
    #: gNMI origin of the table's paths ("" = OpenConfig: none, ``openconfig`` or a module name).
    origin: str = ""
    #: A whole entry goes out as one JSON object at its path (JSON encodings; sonic-gnmi's DB entries).
    json_entries: bool = False

    @property
    def key_names(self) -> tuple[str, ...]:
        """The variable (not fixed) keys, in path order: the layout of a row key."""
        return tuple(e.key for e in self.entity if e.key is not None and e.fixed is None)


IF_MODELS = ("openconfig-interfaces",)
ETH_MODELS = ("openconfig-if-ethernet",)
AFT_MODELS = ("openconfig-network-instance", "openconfig-aft")

#: Interface row layout: name, type, enabled, admin-status, oper-status, last-change,
#: the INTERFACE_COUNTERS in order, last-clear, port-speed.
_IF_COUNTER0 = 6
_IF_LAST_CLEAR = _IF_COUNTER0 + len(INTERFACE_COUNTERS)
IF_OPER_STATUS = 4
IF_LAST_CHANGE = 5

INTERFACES = Table(
    name="interface",
    source="interface",
    entity=(EntityElem("interfaces"), EntityElem("interface", "name")),
    leaves=(
        Leaf(("state", "name"), 0, LeafType.STRING, IF_MODELS),
        Leaf(("state", "type"), 1, LeafType.IDENTITY, IF_MODELS, identity_module="iana-if-type"),
        Leaf(("state", "enabled"), 2, LeafType.BOOL, IF_MODELS),
        Leaf(("state", "admin-status"), 3, LeafType.ENUM, IF_MODELS),
        Leaf(("state", "oper-status"), IF_OPER_STATUS, LeafType.ENUM, IF_MODELS),
        Leaf(("state", "last-change"), IF_LAST_CHANGE, LeafType.UINT64, IF_MODELS),
        *(Leaf(("state", "counters", c), _IF_COUNTER0 + i, LeafType.UINT64, IF_MODELS, sampled=True)
          for i, c in enumerate(INTERFACE_COUNTERS)),
        Leaf(("state", "counters", "last-clear"), _IF_LAST_CLEAR, LeafType.UINT64, IF_MODELS),
        Leaf(("ethernet", "state", "port-speed"), _IF_LAST_CLEAR + 1, LeafType.IDENTITY, ETH_MODELS,
             identity_module="openconfig-if-ethernet"),
    ),
)

_DEFAULT_NI = (EntityElem("network-instances"), EntityElem("network-instance", "name", fixed="default"),
               EntityElem("afts"))

#: Next-hop row layout: index, ip-address, interface, octets-forwarded, packets-forwarded.
NEXT_HOPS = Table(
    name="next-hop",
    source="next-hop",
    entity=(*_DEFAULT_NI, EntityElem("next-hops"), EntityElem("next-hop", "index")),
    leaves=(
        Leaf(("state", "index"), 0, LeafType.UINT64, AFT_MODELS),
        Leaf(("state", "ip-address"), 1, LeafType.STRING, AFT_MODELS),
        Leaf(("state", "counters", "octets-forwarded"), 3, LeafType.UINT64, AFT_MODELS, sampled=True),
        Leaf(("state", "counters", "packets-forwarded"), 4, LeafType.UINT64, AFT_MODELS, sampled=True),
        Leaf(("interface-ref", "state", "interface"), 2, LeafType.STRING, AFT_MODELS),
    ),
    uint_keys=frozenset({"index"}),
)

NEXT_HOP_COUNTERS = Table(
    name="next-hop-counters",
    source="next-hop",
    entity=(*_DEFAULT_NI, EntityElem("counters"), EntityElem("next-hops"), EntityElem("next-hop", "index")),
    leaves=(
        Leaf(("state", "index"), 0, LeafType.UINT64, AFT_MODELS),
        Leaf(("state", "octets-forwarded"), 3, LeafType.UINT64, AFT_MODELS, sampled=True),
        Leaf(("state", "packets-forwarded"), 4, LeafType.UINT64, AFT_MODELS, sampled=True),
    ),
    uint_keys=frozenset({"index"}),
)

_NHG = (*_DEFAULT_NI, EntityElem("next-hop-groups"), EntityElem("next-hop-group", "id"))

NEXT_HOP_GROUPS = Table(
    name="next-hop-group",
    source="next-hop-group",
    entity=_NHG,
    leaves=(Leaf(("state", "id"), 0, LeafType.UINT64, AFT_MODELS),),
    uint_keys=frozenset({"id"}),
)

#: Member row layout: index, weight; keyed by (group id, next-hop index).
NEXT_HOP_GROUP_MEMBERS = Table(
    name="next-hop-group-member",
    source="next-hop-group-member",
    entity=(*_NHG, EntityElem("next-hops"), EntityElem("next-hop", "index")),
    leaves=(
        Leaf(("state", "index"), 0, LeafType.UINT64, AFT_MODELS),
        Leaf(("state", "weight"), 1, LeafType.UINT64, AFT_MODELS),
    ),
    uint_keys=frozenset({"id", "index"}),
)

IP_MODELS = ("openconfig-interfaces", "openconfig-if-ip")

#: IPv4 address row layout: ip, prefix-length; keyed by (interface, subinterface index, ip).
IPV4_ADDRESSES = Table(
    name="ipv4-address",
    source="ipv4-address",
    entity=(EntityElem("interfaces"), EntityElem("interface", "name"), EntityElem("subinterfaces"),
            EntityElem("subinterface", "index"), EntityElem("ipv4"), EntityElem("addresses"),
            EntityElem("address", "ip")),
    leaves=(
        Leaf(("state", "ip"), 0, LeafType.STRING, IP_MODELS),
        Leaf(("state", "prefix-length"), 1, LeafType.UINT, IP_MODELS),
    ),
    uint_keys=frozenset({"index"}),
)

LLDP_MODELS = ("openconfig-lldp",)

#: LLDP neighbor row layout: LLDP_NEIGHBOR_STATE in order; keyed by (interface, neighbor id).
LLDP_NEIGHBORS = Table(
    name="lldp-neighbor",
    source="lldp-neighbor",
    entity=(EntityElem("lldp"), EntityElem("interfaces"), EntityElem("interface", "name"), EntityElem("neighbors"),
            EntityElem("neighbor", "id")),
    leaves=tuple(Leaf(("state", name), i, LeafType.ENUM if name.endswith("-type") else LeafType.STRING, LLDP_MODELS)
                 for i, name in enumerate(LLDP_NEIGHBOR_STATE)),
)

#: IPv4 entry row layout: prefix, next-hop-group; keyed by prefix.
IPV4_ENTRIES = Table(
    name="ipv4-entry",
    source="ipv4-entry",
    entity=(*_DEFAULT_NI, EntityElem("ipv4-unicast"), EntityElem("ipv4-entry", "prefix")),
    leaves=(
        Leaf(("state", "prefix"), 0, LeafType.STRING, AFT_MODELS),
        Leaf(("state", "next-hop-group"), 1, LeafType.UINT64, AFT_MODELS),
    ),
)

QOS_MODELS = ("openconfig-qos",)
PFC_MODELS = ("srl_nokia-qos",)
_QOS_IF = (EntityElem("qos"), EntityElem("interfaces"), EntityElem("interface", "interface-id"))

#: Queue row layout: name, the QUEUE_COUNTERS in order, max-queue-len; keyed by (interface, queue name).
QUEUES = Table(
    name="queue",
    source="queue",
    entity=(*_QOS_IF, EntityElem("output"), EntityElem("queues"), EntityElem("queue", "name")),
    leaves=(
        Leaf(("state", "name"), 0, LeafType.STRING, QOS_MODELS),
        *(Leaf(("state", c), 1 + i, LeafType.UINT64, QOS_MODELS, sampled=True) for i, c in enumerate(QUEUE_COUNTERS)),
        Leaf(("state", "max-queue-len"), 1 + len(QUEUE_COUNTERS), LeafType.UINT64, QOS_MODELS, sampled=True),
    ),
)

#: PFC row layout: priority, the PFC_COUNTERS in order; keyed by (interface, priority).
PFC = Table(
    name="pfc-priority",
    source="pfc",
    entity=(*_QOS_IF, EntityElem("pfc"), EntityElem("statistics"), EntityElem("pfc-priority", "index")),
    leaves=(
        Leaf(("index",), 0, LeafType.UINT64, PFC_MODELS),
        *(Leaf((c,), 1 + i, LeafType.UINT64, PFC_MODELS, sampled=True) for i, c in enumerate(PFC_COUNTERS)),
    ),
    uint_keys=frozenset({"index"}),
)

TABLES: tuple[Table, ...] = (INTERFACES, IPV4_ADDRESSES, NEXT_HOPS, NEXT_HOP_COUNTERS, NEXT_HOP_GROUPS,
                             NEXT_HOP_GROUP_MEMBERS, IPV4_ENTRIES, LLDP_NEIGHBORS, QUEUES, PFC)

#: (name, organization, version) for CapabilityResponse.supported_models.
MODELS: tuple[tuple[str, str, str], ...] = (
    ("openconfig-interfaces", "OpenConfig working group", "3.7.1"),
    ("openconfig-if-ethernet", "OpenConfig working group", "2.14.0"),
    ("openconfig-if-ip", "OpenConfig working group", "3.9.0"),
    ("openconfig-lldp", "OpenConfig working group", "0.2.1"),
    ("openconfig-network-instance", "OpenConfig working group", "4.4.1"),
    ("openconfig-aft", "OpenConfig working group", "3.1.0"),
    ("iana-if-type", "IANA", "2023-01-26"),
    ("openconfig-qos", "OpenConfig working group", "2.2.0"),
    ("srl_nokia-qos", "Nokia", "25.3"),
)

_SPEEDS = {
    10**7: "SPEED_10MB", 10**8: "SPEED_100MB", 10**9: "SPEED_1GB", 2_500_000_000: "SPEED_2500MB",
    5 * 10**9: "SPEED_5GB", 10**10: "SPEED_10GB", 25 * 10**9: "SPEED_25GB", 40 * 10**9: "SPEED_40GB",
    50 * 10**9: "SPEED_50GB", 100 * 10**9: "SPEED_100GB", 200 * 10**9: "SPEED_200GB",
    400 * 10**9: "SPEED_400GB", 600 * 10**9: "SPEED_600GB", 800 * 10**9: "SPEED_800GB",
}


def identity_speed_bps(identity: str) -> int:
    """bit/s of an ETHERNET_SPEED identity (0 for SPEED_UNKNOWN)."""
    return next((bps for bps, name in _SPEEDS.items() if name == identity), 0)


Row = tuple[object, ...]
RowKey = tuple[str, ...]


@dataclass(frozen=True)
class Tick:
    """What one engine tick left in a switch: rows per source, keyed by their key values (strings).

    ``timestamp_ns`` is the tick's end (ns since the Unix epoch; 0 before the first tick).
    """

    timestamp_ns: int
    boot_epoch: int
    rows: dict[str, dict[RowKey, Row]]


_COUNTERS = operator.itemgetter(*INTERFACE_COUNTERS)


def read_tick(state: SwitchState) -> Tick:
    """Copy the served values of ``state`` under its lock (one consistent tick)."""
    with state.lock:
        clear = state.last_clear_ns
        ifaces: dict[RowKey, Row] = {}
        for i in state.interfaces.values():
            try:
                counters = _COUNTERS(i.counters)
            except KeyError:  # an engine that keeps only some counters: the rest read 0
                counters = tuple(i.counters.get(c, 0) for c in INTERFACE_COUNTERS)
            ifaces[(i.name,)] = (i.name, "ethernetCsmacd", True, "UP", "UP" if i.oper_up else "DOWN",
                                 i.last_change_ns, *counters, clear, _SPEEDS.get(i.speed_bps, "SPEED_UNKNOWN"))
        nhs = {(str(n.index),): (n.index, n.ip_address, n.interface, n.octets_forwarded, n.packets_forwarded)
               for n in sorted(state.next_hops.values(), key=lambda n: n.index)}
        groups: dict[RowKey, Row] = {}
        members: dict[RowKey, Row] = {}
        for g in sorted(state.groups.values(), key=lambda g: g.id):
            groups[(str(g.id),)] = (g.id,)
            for idx in sorted(g.next_hops):
                members[(str(g.id), str(idx))] = (idx, g.next_hops[idx])
        addresses = {(port, "0", ip): (ip, plen) for port, (ip, plen) in state.addresses.items()}
        lldp = {(port, n.chassis_id): (n.chassis_id, n.system_name, n.chassis_id, n.chassis_id_type, n.port_id,
                                       n.port_id_type, n.port_description, n.management_address)
                for port, n in state.lldp.items()
                if (i := state.interfaces.get(port)) is None or i.oper_up}  # a down port hears no one
        entries = {(prefix,): (prefix, gid) for prefix, gid in state.ipv4_entries.items()}
        queues: dict[RowKey, Row] = {}
        for (iface, qname), q in sorted(state.queues.items()):
            queues[(iface, qname)] = (qname, *(q.counters.get(c, 0) for c in QUEUE_COUNTERS), q.max_queue_len)
        pfc = {(iface, str(prio)): (prio, *(p.counters.get(c, 0) for c in PFC_COUNTERS))
               for (iface, prio), p in sorted(state.pfc.items())}
        return Tick(state.timestamp_ns, state.boot_epoch, {
            "interface": ifaces, "next-hop": nhs, "next-hop-group": groups, "next-hop-group-member": members,
            "queue": queues, "pfc": pfc, "ipv4-address": addresses, "lldp-neighbor": lldp, "ipv4-entry": entries,
        })
