"""The truth a density map is checked against (no tests here): numpy's isnan / isposinf /
isneginf of the values, binned over the two trailing dimensions as docs/scan.md defines, written
independently of fpclass."""

import numpy as np

BINS = 128  # the documented bound per axis


def binned(a2d: np.ndarray) -> np.ndarray:
    """Counts of a (rows, columns) array summed into min(n, 128) bins per axis, position i in bin
    i * bins // n."""
    rows, cols = a2d.shape
    br, bc = min(rows, BINS), min(cols, BINS)
    out = np.zeros((br, bc), np.int64)
    row_bin = (np.arange(rows) * br // rows)[:, None]
    col_bin = (np.arange(cols) * bc // cols)[None, :]
    np.add.at(out, (row_bin, col_bin), a2d)
    return out


def truth(values, missing=None) -> dict:
    """class -> binned counts over the two trailing dims (leading ones summed), complex values
    counted part by part; `missing`: a mask of blanks (counted as missing, not as their class)."""
    v = np.asarray(values)
    parts = [v.real, v.imag] if v.dtype.kind == "c" else [v]
    parts = [np.asarray(p, np.float64) for p in parts]
    shape = v.shape
    two = (1, 1) if v.ndim == 0 else (1, shape[0]) if v.ndim == 1 else shape[-2:]
    blank = np.zeros(shape, bool) if missing is None else np.asarray(missing)

    def layout(m):
        return binned(m.reshape(-1, *two).sum(axis=0))

    out = {}
    for cls, test in (("nan", np.isnan), ("posinf", np.isposinf), ("neginf", np.isneginf)):
        out[cls] = layout(sum((test(p) & ~blank).astype(np.int64) for p in parts))
    out["missing"] = layout(blank.astype(np.int64) * len(parts))
    return out


def assert_map(tensor, expected):
    m = tensor.density
    assert m is not None and m.counts is not None, getattr(m, "note", None)
    for cls, counts in expected.items():
        np.testing.assert_array_equal(m.of(cls), counts, err_msg=f"{tensor.name} {cls}")
    assert sum(int(c.sum()) for c in expected.values()) == tensor.nonfinite


def plant(shape, dtype=np.float32, seed=0, rate=0.01):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    for value in (np.nan, np.inf, -np.inf):
        flat[rng.random(flat.size) < rate] = value
    a.reshape(-1)[: min(7, flat.size)] = np.nan  # a dense corner
    return a
