"""Max-min fair rates by progressive filling over a sparse flows x links incidence matrix.

Part of the shared fabric model: the simulator moves its traffic with it, and the routing what-if
(``flowtracer.whatif.replay``) estimates completion times with it.

The unit of allocation is a *group* of coupled flows that always run at the same rate: the flows
of one NCCL ring channel (a ring step waits for its slowest edge, so no edge can run ahead), or
the QPs of one connection (NCCL stripes each message evenly over them). A lone flow is a group of
one. Progressive filling raises the rate of every unfrozen group together; when a link fills up,
every group with a flow on it freezes; a group also freezes at its demand cap. The result is the
max-min fair allocation of the coupled problem: no group can get more without taking from a group
that has no more than it.

The incidence matrix is given in coordinate form (one entry per flow crossing a link, tagged with
the flow's group), so each round is a few ``np.bincount`` calls over the entries: O(rounds x
entries) with rounds <= number of distinct bottleneck levels.

Entries may carry a weight: an entry of weight w puts w x (its group's rate) on its link. Weight 1
(the default) is a whole flow at the group's rate; a flow sprayed evenly over two paths has
entries of weight 0.5 on each path's links; a small flow coupled to a big one (an NCCL
clear-to-send stream riding with its data stream) has a weight equal to its share of the big
one's bytes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: Relative slack when deciding that a link is full or a group reached its demand.
REL_TOL = 1e-9


def max_min_rates(entry_group: npt.NDArray[np.intp], entry_link: npt.NDArray[np.intp],
                  capacity: npt.NDArray[np.float64], n_groups: int,
                  demand: npt.NDArray[np.float64] | None = None,
                  entry_weight: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.float64]:
    """Rate of every flow of each group (bit/s) under max-min fairness.

    ``entry_group[e]``/``entry_link[e]``: entry ``e`` is one flow of group ``entry_group[e]``
    crossing link ``entry_link[e]`` (a group with k flows on one link has k entries for it).
    ``capacity[l]``: bit/s of link ``l``. ``demand[g]``: the most group ``g``'s flows want (bit/s;
    ``inf`` for elastic, 0 for a stalled group). ``entry_weight[e]`` (default 1): entry ``e`` loads
    its link with weight x the group's rate; weights must be positive. A group with no entries
    gets its demand (0 when it is infinite: such a group crosses nothing and has nothing to be
    fair about).
    """
    n_links = len(capacity)
    want = np.full(n_groups, np.inf) if demand is None else np.asarray(demand, dtype=np.float64).copy()
    rate = np.zeros(n_groups)
    if n_groups == 0:
        return rate
    w = np.ones(len(entry_group)) if entry_weight is None else np.asarray(entry_weight, dtype=np.float64)
    has_entry = np.bincount(entry_group, minlength=n_groups) > 0
    free = ~has_entry
    rate[free] = np.where(np.isfinite(want[free]), want[free], 0.0)
    active = has_entry & (want > 0)
    cap = np.asarray(capacity, dtype=np.float64)
    while active.any():
        on = active[entry_group]
        n_active = np.bincount(entry_link[on], weights=w[on], minlength=n_links)
        load = np.bincount(entry_link, weights=rate[entry_group] * w, minlength=n_links)
        residual = np.maximum(cap - load, 0.0)
        used = n_active > 0
        inc = np.inf
        if used.any():
            inc = float((residual[used] / n_active[used]).min())
        headroom = want[active] - rate[active]
        inc = max(0.0, min(inc, float(headroom.min())))
        if not np.isfinite(inc):  # unreachable: every active group has entries, so some link bounds it
            break
        rate[active] += inc
        full = used & (residual - inc * n_active <= REL_TOL * np.maximum(cap, 1.0))
        blocked = np.bincount(entry_group, weights=full[entry_link].astype(np.float64), minlength=n_groups) > 0
        sated = rate >= want * (1.0 - REL_TOL)
        frozen = active & (blocked | sated)
        if not frozen.any():  # numerical corner: freeze the tightest group so the loop always ends
            frozen = active.copy()
        active &= ~frozen
    return rate
