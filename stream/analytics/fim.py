"""Flow Imbalance Metric and its companions, over the member loads of one ECMP group.

For a group with k members carrying x_1..x_k (bytes, or flow counts) in a window:

    FIM = sum_i |x_i - mean(x)| / (2 * sum_i x_i) / (1 - 1/k)

0 means perfectly even; 1 means everything on one member. The first factor is the share of
the group's traffic that would have to move to make it even; dividing by (1 - 1/k), the value
of that share when one member carries everything, makes groups of different widths comparable.
docs/fim.md gives the rationale and how this relates to FlowTracer's (unpublished) formula.
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


def fim(loads: Sequence[float] | np.ndarray) -> float:
    """FIM of member loads, in [0, 1]; 0 for an idle group or a group of one member."""
    x = np.asarray(loads, dtype=np.float64)
    k = x.size
    total = float(x.sum())
    if k < 2 or total <= 0.0:
        return 0.0
    dev = float(np.abs(x - total / k).sum())
    return min(1.0, dev / (2.0 * total) / (1.0 - 1.0 / k))


def imbalance(loads: Sequence[float] | np.ndarray) -> Imbalance:
    """FIM, max/mean and coefficient of variation (population std / mean) of member loads."""
    x = np.asarray(loads, dtype=np.float64)
    total = float(x.sum())
    if x.size == 0 or total <= 0.0:
        return Imbalance(0.0, 0.0, 0.0, 0.0)
    mean = total / x.size
    return Imbalance(fim(x), float(x.max() / mean), float(x.std() / mean), total)


def fabric_fim(group_fims: Sequence[float], group_bytes: Sequence[float]) -> float:
    """Byte-weighted mean of the FIMs of groups that carried traffic; 0 when none did."""
    f = np.asarray(group_fims, dtype=np.float64)
    w = np.asarray(group_bytes, dtype=np.float64)
    carried = w > 0
    if not carried.any():
        return 0.0
    return float((f[carried] * w[carried]).sum() / w[carried].sum())
