"""Where one trace probe goes: each switch's hash over the probe's own headers, or a per-probe member at a
switch that spreads packets (pure apart from the seeded choice).

A probe is a packet like any other, so a switch forwards it as it forwards the flow's packets:

- ``5tuple``: the configured hash of the probe's IP/UDP fields (the flow's, since the probe carries its 5-tuple);
- ``5tuple+bth_dqp``: those fields plus the BTH destination QP. A RoCE-formed probe carries the flow's
  destination QP in its BTH and is placed like the flow; a plain UDP probe has no BTH, which the model treats
  as destination QP 0, so it is placed as a packet of some other QP would be: usually not where the flow goes;
- ``spray``: round robin per switch: each probe the switch forwards goes to the member after the last one's;
- ``adaptive``: a member drawn at random per probe: which member is least loaded when a probe arrives is set by
  queue state the probe's headers do not decide.

So probes of one 5-tuple through a spreading switch go different ways, as the flow's packets do.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from flowtracer.fabric.ecmp_hash import SPREAD_MODES, EcmpHash, HashMode, HeaderFields
from flowtracer.fabric.routing import Fabric


@dataclass
class ProbeDealer:
    """A spreading switch's choice of member for each probe it forwards (``member`` as ``EcmpHash.member``)."""

    mode: HashMode
    rng: random.Random
    cursor: int = 0

    def member(self, headers: HeaderFields, members: int) -> int:
        """Index in [0, members) of the member this probe leaves on (``headers`` do not matter: see the module)."""
        if self.mode is HashMode.ADAPTIVE:
            return self.rng.randrange(members)
        self.cursor += 1
        return (self.cursor - 1) % members


@dataclass
class ProbeRouter:
    """The per-switch member choice for probes over ``fabric``: the topology's hash, a ``ProbeDealer`` where the
    switch spreads."""

    fabric: Fabric
    seed: int | None = None
    models: dict[str, EcmpHash | ProbeDealer] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        topo = self.fabric.topology
        self.models = {}
        for s in topo.switches:
            mode = topo.hash_mode(s.name)
            self.models[s.name] = (ProbeDealer(mode, rng) if mode in SPREAD_MODES
                                   else self.fabric.hash_model(s.name))

    def path(self, headers: HeaderFields, src_nic: str, dst_nic: str, down: frozenset[str] = frozenset(),
             weights: Mapping[str, int] | None = None) -> tuple[str, ...] | None:
        """The directed links this one probe crosses (``Fabric.hash_path`` with the probe's member choices);
        None when the destination is unreachable."""
        return self.fabric.hash_path(headers, src_nic, dst_nic, down=down,
                                     hash_models=self.models,  # type: ignore[arg-type]  # ProbeDealer has member()
                                     weights=weights)
