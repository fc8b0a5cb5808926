"""Transfers' max-min fair rates over their flows' paths: pure, from the links each transfer's flows cross and
the links' payload capacity (bit/s). The engine adds what the congestion model holds at 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flowtracer.fabric.maxmin import max_min_rates
from flowtracer.sim.fabric.flows import Transfer


def transfer_links(t: Transfer, route_version: int, spreading: bool) -> np.ndarray | None:
    """Link indexes the transfer's flows cross (None: a flow has no path), cached on the transfer per
    ``route_version``; with ``spreading`` a spread flow's entries get its share of each link (``link_weights``)."""
    if t.links[0] != route_version:
        paths = [f.path for f in t.flows]
        arr = None if any(p is None for p in paths) else np.fromiter(
            (li for p in paths for li in p), dtype=np.intp)  # type: ignore[union-attr]
        t.links = (route_version, arr)
        t.link_weights = None if arr is None or not spreading or not any(
            f.spread for f in t.flows) else np.fromiter(
            (f.spread.link_shares[li] if f.spread else 1.0 for f in t.flows for li in f.path or ()),
            dtype=np.float64)
    return t.links[1]


def fair_rates(transfers: Sequence[Transfer], arrs: Sequence[np.ndarray | None], capacity: np.ndarray,
               spreading: bool) -> np.ndarray:
    """Each transfer's payload rate (bit/s): max-min fair over ``capacity`` (bit/s per link), up to its demand.
    ``arrs``: each transfer's links (``transfer_links``); a flow without a path stalls its set."""
    demand = np.array([0.0 if a is None else t.demand for t, a in zip(transfers, arrs, strict=True)],
                      dtype=np.float64)
    lens = np.array([0 if a is None else len(a) for a in arrs], dtype=np.intp)
    links = [a for a in arrs if a is not None and len(a)]
    groups = [np.repeat(np.arange(len(arrs), dtype=np.intp), lens)] if links else []
    empty = np.zeros(0, dtype=np.intp)
    weights = None
    if spreading and links:  # a spread flow loads each link by its share there
        weights = np.concatenate([np.ones(len(a)) if t.link_weights is None else t.link_weights
                                  for t, a in zip(transfers, arrs, strict=True) if a is not None and len(a)])
    return max_min_rates(np.concatenate(groups) if groups else empty, np.concatenate(links) if links else empty,
                         capacity, len(transfers), demand, weights)
