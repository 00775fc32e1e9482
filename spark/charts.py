"""PNG charts for the analytics jobs (matplotlib's object API with the Agg canvas: no display,
no global pyplot state, safe in any process)."""

from __future__ import annotations

import pathlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: Size of every chart, inches (at :data:`DPI`).
FIGSIZE = (10.0, 5.5)
#: Resolution of every chart, dots per inch.
DPI = 100


def new_figure(rows: int = 1, cols: int = 1, *, title: str) -> tuple[Figure, list[Axes]]:
    """A figure on the Agg canvas with ``rows × cols`` axes (flattened, row by row)."""
    fig = Figure(figsize=(FIGSIZE[0], FIGSIZE[1] * max(1, rows) / 1.4 if rows > 1 else FIGSIZE[1]), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    fig.suptitle(title)
    return fig, [ax for row in axes for ax in row]


def save(fig: Figure, path: pathlib.Path) -> pathlib.Path:
    """Write ``fig`` as a PNG to ``path`` and return it."""
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def message_chart(path: pathlib.Path, title: str, message: str) -> pathlib.Path:
    """A chart that only says ``message`` (nothing to plot is an answer too)."""
    fig, (ax,) = new_figure(title=title)
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=16)
    return save(fig, path)


def bars(
    ax: Axes, labels: Sequence[str], series: Mapping[str, Sequence[float]], *, ylabel: str, horizontal: bool = False
) -> None:
    """Stacked bars: one bar per label, one colour per series (a legend when more than one)."""
    base = [0.0] * len(labels)
    for name, values in series.items():
        if horizontal:
            ax.barh(labels, values, left=base, label=name)
        else:
            ax.bar(labels, values, bottom=base, label=name)
        base = [b + v for b, v in zip(base, values)]
    (ax.set_xlabel if horizontal else ax.set_ylabel)(ylabel)
    if horizontal:  # totals at the bar ends: a zero is then visible too
        for y, total in enumerate(base):
            ax.annotate(f"{total:g}", (total, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize="small")
    if len(series) > 1:
        ax.legend(fontsize="small")
    if not horizontal and len(labels) > 8:
        ax.tick_params(axis="x", labelrotation=60)


def lines(ax: Axes, series: Mapping[str, tuple[Sequence[datetime], Sequence[float]]], *, ylabel: str) -> None:
    """One line per series over time."""
    for name, (xs, ys) in series.items():
        # matplotlib plots datetimes; its stubs only admit numbers
        ax.plot(list(xs), list(ys), marker="." if len(xs) < 30 else None, label=name)  # type: ignore[arg-type]
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    ax.tick_params(axis="x", labelrotation=30)


def pivot(rows: Iterable[Any], bar: str, colour: str, value: str) -> tuple[list[str], dict[str, list[float]]]:
    """Bars and series for :func:`bars` from rows: one bar per distinct ``bar`` field (in its natural
    order), one series per distinct ``colour`` field, summing the ``value`` field (0 where absent)."""
    sums: dict[str, dict[Any, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        sums[str(getattr(r, colour))][getattr(r, bar)] += float(getattr(r, value))
    keys = sorted({key for by_bar in sums.values() for key in by_bar})
    return [str(k) for k in keys], {name: [by_bar.get(k, 0.0) for k in keys] for name, by_bar in sorted(sums.items())}
