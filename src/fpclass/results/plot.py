"""ScanReport.plot: a tensor's density map drawn with matplotlib (the fpclass[plot] extra).

One panel per class the map holds (NaN, +Inf, -Inf, missing; NaN alone when it holds none), each
an image of the binned counts themselves (AxesImage.get_array() is the map's counts), over the
tensor's two trailing dimensions (results/density.py). Imports nothing of the result model:
ScanReport.plot imports this module.
"""

from __future__ import annotations

from .._optional import require

#: A colour map per class, as the HTML page colours them.
COLORMAPS = {"nan": "Reds", "posinf": "Greens", "neginf": "Blues", "missing": "Greys"}
TITLES = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf", "missing": "missing"}


def find(report, name, file=None):
    """The one tensor of `report` named `name` (in `file`, when given); ValueError naming the
    tensors with maps otherwise."""
    hits = [t for t in report.tensors if t.name == name and (file is None or t.file == file)]
    if len(hits) == 1:
        return hits[0]
    mapped = [t.name for t in report.tensors if getattr(t, "density", None) is not None]
    if not hits:
        raise ValueError(f"no tensor named {name!r} in the report; tensors with maps: "
                         + (", ".join(map(repr, mapped[:20])) or "none"))
    raise ValueError(f"{len(hits)} tensors are named {name!r} (in "
                     + ", ".join(t.file for t in hits[:5]) + "): pass file= too")


def plot(report, name, *, file=None, ax=None):
    """Draw the density map of tensor `name`; returns the matplotlib Figure. `ax`: an Axes to
    draw the first panel into (its figure gets the others). ValueError when the tensor has no
    map (no findings, or a scan without maps=True)."""
    tensor = find(report, name, file)
    m = getattr(tensor, "density", None)
    if m is None:
        why = ("it has no findings" if not tensor.nonfinite else
               "the scan gathered no maps: scan(..., maps=True) or fpclass scan --html")
        raise ValueError(f"tensor {name!r} has no density map: {why}")
    if m.planes is None:
        raise ValueError(f"tensor {name!r} has no density map: {m.note}")
    plt = require("matplotlib.pyplot", "plot", "ScanReport.plot")
    shown = [c for c in m.classes if m.of(c).any()] or ["nan"]
    if ax is None:
        fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 4), squeeze=False)
        axes = list(axes[0])
    else:
        fig = ax.figure
        axes = [ax] + [fig.add_subplot(1, len(shown), k + 1) for k in range(1, len(shown))]
    for a, cls in zip(axes, shown):
        counts = m.of(cls)
        image = a.imshow(counts, cmap=COLORMAPS[cls], interpolation="nearest", aspect="auto",
                         extent=(0, m.columns, m.rows, 0), vmin=0)
        a.set_title(f"{TITLES[cls]}: {int(counts.sum())}")
        a.set_xlabel(f"column (of {m.columns})")
        a.set_ylabel(f"row (of {m.rows})")
        fig.colorbar(image, ax=a, shrink=0.8, label="values per bin")
    fig.suptitle(f"{tensor.name} {tensor.dtype} {tuple(tensor.shape)}")
    return fig
