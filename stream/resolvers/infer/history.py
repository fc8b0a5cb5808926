"""The evidence history of one ECMP group for the ``infer`` resolver, and its JSON form (pure).

A ring of ``history_windows`` rows, one per evidence window: ``x`` the window-scaled bytes of each
flow column, ``y`` the window-scaled bytes of each member's counter, ``mask`` 1 where the member's
counter was present. ``row_seq`` numbers the rows as appended (-1: an empty or forgotten row). Columns
belong to the group (:class:`~flowtracer.stream.resolvers.infer.group.GroupState` allocates and
reuses them); this module only appends and reads rows.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from flowtracer.stream.resolvers.infer.config import InferConfig


def array_to_json(a: np.ndarray) -> dict[str, Any]:
    """An array as JSON: dtype, shape and its bytes, zlib-compressed (histories hold many zeros)."""
    data = base64.b64encode(zlib.compress(np.ascontiguousarray(a).tobytes(), 1)).decode("ascii")
    return {"dtype": a.dtype.str, "shape": list(a.shape), "zlib": data}


def array_from_json(d: Mapping[str, Any]) -> np.ndarray:
    """The array ``array_to_json`` wrote."""
    raw = zlib.decompress(base64.b64decode(d["zlib"]))
    return np.frombuffer(raw, dtype=np.dtype(d["dtype"])).reshape(d["shape"]).copy()


class EvidenceHistory:
    """The ring of evidence windows of one group with ``members`` member counters (module docstring)."""

    def __init__(self, members: int, cfg: InferConfig) -> None:
        self.cfg = cfg
        h = cfg.history_windows
        self.x = np.zeros((h, 0))  # window-scaled flow bytes, rows x columns
        self.y = np.zeros((h, members))  # window-scaled member bytes
        self.mask = np.zeros((h, members))  # 1 where the member's counter was present
        self.row_seq = np.full(h, -1, dtype=np.int64)
        self.seq = 0  # evidence rows appended so far

    def add_row(self, cols: np.ndarray, flow_bytes: np.ndarray, member_bytes: np.ndarray,
                present: np.ndarray) -> None:
        """Append one window: flow tx bytes per column, member counter bytes (valid where ``present``).

        Both are divided by the window's scale (its larger byte total plus ``min_window_bytes``), so
        residuals are shares of the window and quiet windows weigh little.
        """
        scale = max(float(flow_bytes.sum()), float(member_bytes[present].sum())) + self.cfg.min_window_bytes
        row = self.seq % self.x.shape[0]
        self.x[row, :] = 0.0
        np.add.at(self.x[row], cols, flow_bytes / scale)
        self.y[row] = np.where(present, member_bytes, 0.0) / scale
        self.mask[row] = present.astype(np.float64)
        self.row_seq[row] = self.seq
        self.seq += 1

    def data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Valid rows (oldest first), columns with bytes in them, and the matching x, y, mask."""
        rows = np.flatnonzero(self.row_seq >= 0)
        rows = rows[np.argsort(self.row_seq[rows])]
        cols = np.flatnonzero((self.x[rows] > 0).any(axis=0))
        return rows, cols, self.x[np.ix_(rows, cols)], self.y[rows], self.mask[rows]
