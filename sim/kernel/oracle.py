"""The forwarding oracle: which path the kernel gives a flow, asked hop by hop (ground truth).

At each switch on the way, ``ip -n <switch> route get <dst> from <src> iif <ingress port> ipproto udp
sport <s> dport <d>`` runs the same fib lookup, with the same L4 multipath hash and seed, as a packet
of that flow arriving on that port; the answer's ``dev`` is the egress port, and its cable leads to the
next namespace. Queries are batched: one ``ip -batch`` per namespace and hop level, however many
flows. Paths come back in the form of ``Fabric.hash_path``: a tuple of directed link ids from the
source NIC to the destination NIC, or None when the kernel has no route (e.g. after link failures).
Cached per (5-tuple, NICs); ``invalidate()`` after any link state change.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.routing import DirectedLink, link_id
from flowtracer.sim.kernel.netns import KernelFabric, KernelFabricError, ip_batch

_FAILED = re.compile(r"Command failed .*:(\d+)")
_PROTO = {17: "udp", 6: "tcp"}

Query = tuple[HeaderFields, str, str]  # headers, source NIC, destination NIC ("host:rdma_device")
Path_ = tuple[str, ...]


class KernelOracle:
    """``path``/``paths``: the kernel's forwarding decision for flows, hop by hop, cached."""

    def __init__(self, kf: KernelFabric) -> None:
        self.kf = kf
        self.fabric = kf.plan.fabric
        self._out: dict[tuple[str, str], DirectedLink] = {
            (d.src_node, d.src_port): d for d in self.fabric.links.values()}
        self._cache: dict[tuple[HeaderFields, str, str], Path_ | None] = {}
        #: ``ip route get`` queries asked so far (for measurements).
        self.queries = 0

    def invalidate(self) -> None:
        """Forget every cached path (call after a link state change)."""
        self._cache.clear()

    def path(self, headers: HeaderFields, src_nic: str, dst_nic: str) -> Path_ | None:
        return self.paths([(headers, src_nic, dst_nic)])[0]

    def paths(self, queries: Sequence[Query]) -> list[Path_ | None]:
        """Paths of many flows, asked in one batch per namespace and hop."""
        todo = [q for q in dict.fromkeys(queries) if q not in self._cache]
        if todo:
            for q, p in zip(todo, self._resolve(todo), strict=True):
                self._cache[q] = p
        return [self._cache[q] for q in queries]

    def _resolve(self, todo: list[Query]) -> list[Path_ | None]:
        fabric = self.fabric
        result: list[Path_ | None] = [None] * len(todo)
        # state per query: (path so far, switch, ingress ifname)
        active: dict[int, tuple[list[str], str, str]] = {}
        for i, (_h, src, _dst) in enumerate(todo):
            s = fabric.nics[src]
            up = link_id(s.host, s.nic.rdma_device, s.leaf, s.leaf_port)
            if up in self.kf.down:
                continue
            active[i] = ([up], s.leaf, self.kf.ifname(s.leaf, s.leaf_port))
        for _ in range(len(fabric.out_links) + 1):
            if not active:
                break
            by_ns: dict[str, list[int]] = {}
            for i, (_p, sw, _iif) in active.items():
                by_ns.setdefault(sw, []).append(i)
            procs = []
            for sw, idxs in by_ns.items():
                lines = []
                for i in idxs:
                    h = todo[i][0]
                    iif = active[i][2]
                    proto = _PROTO.get(h.ip_proto, "udp")
                    lines.append(f"route get {h.dst_ip} from {h.src_ip} iif {iif} ipproto {proto} "
                                 f"sport {h.udp_src_port} dport {h.udp_dst_port}")
                self.queries += len(lines)
                procs.append((sw, idxs, ip_batch(lines, self.kf.netns_name(sw), json=True, force=True, wait=False)))
            nxt: dict[int, tuple[list[str], str, str]] = {}
            for sw, idxs, p in procs:
                assert isinstance(p, subprocess.Popen)
                out, err = p.communicate()
                failed = {int(m.group(1)) for m in _FAILED.finditer(err)}
                answers = iter(line for line in out.splitlines() if line.strip())
                for n, i in enumerate(idxs, start=1):
                    if n in failed:
                        continue  # no route: the flow is dropped here
                    try:
                        ans = json.loads(next(answers))[0]
                    except (StopIteration, ValueError, IndexError):
                        raise KernelFabricError(f"unexpected `ip route get` answer in {sw}: {out[:200]!r}") from None
                    if ans.get("type") in ("blackhole", "unreachable", "prohibit") or "dev" not in ans:
                        continue
                    port = self.kf.plan.port_of.get((sw, ans["dev"]))
                    hop = self._out.get((sw, port)) if port is not None else None
                    if hop is None:
                        continue
                    path = [*active[i][0], hop.id]
                    if hop.host_link:
                        if f"{hop.dst_node}:{hop.dst_port}" == todo[i][2]:
                            result[i] = tuple(path)
                        continue
                    nxt[i] = (path, hop.dst_node, self.kf.ifname(hop.dst_node, hop.dst_port))
            active = nxt
        return result
