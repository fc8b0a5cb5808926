"""Exact integer columns: Python ints as int64 numpy arrays, or as object arrays when one does not fit.

The agent's counters are 64-bit unsigned; a value past 2^63 must stay exact, so every column helper
falls back to Python ints (object dtype) instead of wrapping or going to float.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

_I64 = np.int64
INT64_SAFE = 1 << 62
"""Sums of fewer than 2 values this large cannot overflow int64."""


def int_column(values: Iterable[Any], n: int) -> np.ndarray:
    """Python ints -> an int64 array, or an object array of the same ints when one does not fit."""
    if not isinstance(values, list):
        values = list(values)
    try:
        return np.fromiter(values, _I64, n)
    except OverflowError:
        return np.array(values, dtype=object).reshape(n)


def optional_int_column(values: list[int | None]) -> tuple[np.ndarray, np.ndarray | None]:
    """Ints or None -> (array with 0 for None, mask of the non-None rows or None when all are)."""
    n = len(values)
    try:
        return np.fromiter(values, _I64, n), None
    except TypeError:
        pass
    except OverflowError:
        if None not in values:
            return np.array(values, dtype=object).reshape(n), None
    obj = np.array(values, dtype=object).reshape(n)
    has = np.not_equal(obj, None)
    obj[~has] = 0
    try:
        return obj.astype(_I64), has
    except OverflowError:
        return obj, has


def exact_sum(a: np.ndarray) -> int:
    """Sum of an integer column as a Python int, without int64 overflow."""
    if not len(a):
        return 0
    if a.dtype != object and int(a.max()) < INT64_SAFE // len(a) and int(a.min()) > -INT64_SAFE // len(a):
        return int(a.sum())
    return sum(a.tolist())


def object_column(values: list[Any]) -> np.ndarray:
    """A 1-D object array of *values* (strings, ints or tuples), never split into a 2-D array."""
    a = np.empty(len(values), dtype=object)
    a[:] = values
    return a


def put_widening(a: np.ndarray, idx: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a[idx] = v``, widening ``a`` to Python ints when ``v`` holds them."""
    if v.dtype == object and a.dtype != object:
        a = a.astype(object)
    a[idx] = v
    return a

