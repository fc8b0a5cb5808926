"""Flow Imbalance Metric and its companions, over the member loads of one ECMP group.

For a group with k members of weights w_1..w_k carrying x_1..x_k (bytes, or flow counts) in a
window, each member's fair share of the total T = sum_i x_i is e_i = w_i / sum_j w_j, and

    FIM = sum_i |x_i - T * e_i| / (2 * T) / (1 - min_i e_i)

0 means every member carries its weight's share; 1 means everything on the member with the
smallest share. The first factor is the share of the group's traffic that would have to move to
make it carry its weights; dividing by (1 - min e), the value of that share in the worst case,
makes groups of different widths and weights comparable. Without weights (plain ECMP) every
e_i = 1/k and this is sum_i |x_i - mean(x)| / (2 * T) / (1 - 1/k). docs/fim.md gives the
rationale and how this relates to FlowTracer's (unpublished) formula.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Imbalance:
    """Imbalance figures of one group in one window. Unitless; ``total`` in the input's unit."""

    fim: float
    max_mean_ratio: float
    cv: float
    total: float


def fair_shares(k: int, weights: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
    """Each member's share of the group's load by its weight (1/k each without weights); sums to 1."""
    if weights is None:
        return np.full(k, 1.0 / k) if k else np.zeros(0)
    w = np.asarray(weights, dtype=np.float64)
    if w.size != k:
        raise ValueError(f"{w.size} weights for {k} members")
    if k and (w <= 0).any():
        raise ValueError(f"weights must be > 0, got {w.tolist()}")
    return w / w.sum() if k else w


def fim(loads: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray | None = None) -> float:
    """FIM of member loads against member ``weights`` (equal when None), in [0, 1]; 0 for an idle group or a
    group of one member."""
    x = np.asarray(loads, dtype=np.float64)
    k = x.size
    e = fair_shares(k, weights)
    total = float(x.sum())
    if k < 2 or total <= 0.0:
        return 0.0
    dev = float(np.abs(x - total * e).sum())
    return min(1.0, dev / (2.0 * total) / (1.0 - float(e.min())))


def imbalance(loads: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray | None = None) -> Imbalance:
    """FIM, max/mean and coefficient of variation of member loads, each member's load taken relative to its fair
    share (``x_i / (T * e_i)``; with equal weights x_i / mean(x)): max of those and their population std."""
    x = np.asarray(loads, dtype=np.float64)
    total = float(x.sum())
    if x.size == 0 or total <= 0.0:
        return Imbalance(0.0, 0.0, 0.0, 0.0)
    r = x / (total * fair_shares(x.size, weights))
    return Imbalance(fim(x, weights), float(r.max()), float(r.std()), total)


def fabric_fim(group_fims: Sequence[float], group_bytes: Sequence[float]) -> float:
    """Byte-weighted mean of the FIMs of groups that carried traffic; 0 when none did."""
    f = np.asarray(group_fims, dtype=np.float64)
    w = np.asarray(group_bytes, dtype=np.float64)
    carried = w > 0
    if not carried.any():
        return 0.0
    return float((f[carried] * w[carried]).sum() / w[carried].sum())
