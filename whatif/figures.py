"""Figures of a what-if: per-link load bars per strategy, FIM per strategy, completion time per strategy.

Each figure is rendered once to PNG (for files and Markdown) and once to SVG (inlined in the HTML
page, which therefore needs nothing from the network). matplotlib is imported on first use with
the non-interactive Agg backend, so nothing here needs a display.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flowtracer.whatif.replay import ReplayResult

#: One color per strategy family, stable across figures.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")


@dataclass(frozen=True)
class Figure:
    """One rendered figure: file stem, caption, PNG bytes and SVG text."""

    name: str
    caption: str
    png: bytes
    svg: str


class FiguresUnavailable(RuntimeError):
    """matplotlib is not installed."""


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend; ``FiguresUnavailable`` when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise FiguresUnavailable("figures need matplotlib: pip install 'flowtracer[whatif]'") from None

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
                         "svg.fonttype": "none", "figure.dpi": 110})
    return plt


def render(fig: Any, name: str, caption: str, svg: bool = True) -> Figure:
    """Render a matplotlib figure to PNG and (unless ``svg`` is False) SVG, then close it."""
    plt = pyplot()
    png, buf = io.BytesIO(), io.StringIO()
    fig.savefig(png, format="png", bbox_inches="tight")
    if svg:
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return Figure(name, caption, png.getvalue(), text[text.find("<svg"):] if svg else "")


def link_label(link_id: str, all_ids: Sequence[str]) -> str:
    """``leaf01→spine01`` for ``leaf01:Ethernet5>spine01:Ethernet1``; with ports when node pairs repeat."""
    def short(lid: str) -> str:
        a, b = lid.split(">", 1)
        return f"{a.split(':', 1)[0]}→{b.split(':', 1)[0]}"

    s = short(link_id)
    if sum(1 for x in all_ids if short(x) == s) > 1:
        a, b = link_id.split(">", 1)
        return f"{a}→{b}"
    return s


def link_loads(results: Sequence[ReplayResult], conditions: str, name: str = "links", svg: bool = True) -> Figure:
    """Per-link utilization bars, one panel per strategy, for one set of conditions."""
    plt = pyplot()
    rows = [r for r in results if r.conditions == conditions]
    links = sorted({lid for r in rows for lid, u in r.link_util.items() if u > 0}) or \
        sorted({lid for r in rows for lid in r.link_util})
    n = len(rows)
    cols = 2 if n > 1 else 1
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(11, 1.9 * nrows + 0.6), sharex=True, sharey=True, squeeze=False)
    labels = [link_label(lid, links) for lid in links]
    top = max([1.0] + [r.link_util.get(lid, 0.0) for r in rows for lid in links])
    for i, r in enumerate(rows):
        ax = axes[i // cols][i % cols]
        vals = [r.link_util.get(lid, 0.0) for lid in links]
        colors = ["#e15759" if v > 1.0 else PALETTE[i % len(PALETTE)] for v in vals]
        ax.bar(range(len(links)), vals, color=colors)
        ax.axhline(1.0, color="#888", lw=0.8, ls="--")
        ax.set_title(f"{r.strategy}  (FIM {r.fim:.2f}, max util {r.max_util:.2f})", fontsize=9, loc="left")
        ax.set_ylim(0, top * 1.08)
        ax.set_ylabel("utilization")
    for j in range(n, nrows * cols):
        axes[j // cols][j % cols].axis("off")
    for c in range(cols):
        last = max(i for i in range(n) if i % cols == c)
        ax = axes[last // cols][c]
        ax.set_xticks(range(len(links)))
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        ax.tick_params(labelbottom=True)
    fig.suptitle(f"Per-link utilization of the fabric links per strategy ({conditions})", fontsize=10)
    fig.tight_layout()
    return render(fig, name, f"Utilization of every switch-to-switch link over the replayed range, per strategy, "
                             f"{conditions}; dashed: capacity; red: over capacity (the traffic would take longer).",
                  svg)


def fim_bars(results: Sequence[ReplayResult], name: str = "fim") -> Figure:
    """FIM (bytes and flows) per strategy, one group of bars per set of conditions."""
    plt = pyplot()
    conds = list(dict.fromkeys(r.conditions for r in results))
    strategies = list(dict.fromkeys(r.strategy for r in results))
    fig, axes = plt.subplots(1, len(conds), figsize=(5.5 * len(conds), 3.4), squeeze=False, sharey=True)
    for ci, cond in enumerate(conds):
        ax = axes[0][ci]
        by = {r.strategy: r for r in results if r.conditions == cond}
        xs = range(len(strategies))
        ax.bar([x - 0.2 for x in xs], [by[s].fim if s in by else 0 for s in strategies], 0.4, label="FIM (bytes)",
               color=PALETTE[0])
        ax.bar([x + 0.2 for x in xs], [by[s].fim_flows if s in by else 0 for s in strategies], 0.4,
               label="FIM (flows)", color=PALETTE[1])
        ax.set_xticks(list(xs))
        ax.set_xticklabels(strategies, rotation=35, ha="right")
        ax.set_ylim(0, 1.05)
        ax.set_title(cond, fontsize=9, loc="left")
        if ci == 0:
            ax.set_ylabel("FIM (0 even .. 1 all on one member)")
            ax.legend(frameon=False)
    fig.tight_layout()
    return render(fig, name, "Fabric FIM per strategy, over bytes and over flow counts (docs/fim.md).")


def completion_bars(results: Sequence[ReplayResult], name: str = "completion") -> Figure:
    """Estimated communication time per strategy, one panel per set of conditions."""
    plt = pyplot()
    conds = list(dict.fromkeys(r.conditions for r in results))
    fig, axes = plt.subplots(1, len(conds), figsize=(5.5 * len(conds), 3.4), squeeze=False, sharey=True)
    for ci, cond in enumerate(conds):
        ax = axes[0][ci]
        rows = [r for r in results if r.conditions == cond]
        vals = [r.completion_s if math.isfinite(r.completion_s) else 0.0 for r in rows]
        ax.bar(range(len(rows)), vals, color=[PALETTE[i % len(PALETTE)] for i in range(len(rows))])
        for i, r in enumerate(rows):
            if not math.isfinite(r.completion_s):
                ax.text(i, 0, "unreachable", rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([r.strategy for r in rows], rotation=35, ha="right")
        ax.set_title(cond, fontsize=9, loc="left")
        if ci == 0:
            ax.set_ylabel("communication time (s)")
    fig.tight_layout()
    return render(fig, name, "Estimated time to move the recorded volume under max-min fair sharing, per strategy.")


def strategy_figures(results: Sequence[ReplayResult]) -> list[Figure]:
    """The three figures of ``flowtracer whatif --out``: link loads per condition, FIM, completion time."""
    conds = list(dict.fromkeys(r.conditions for r in results))
    figs = [link_loads(results, c, f"links-{i}") for i, c in enumerate(conds)]
    return [*figs, fim_bars(results), completion_bars(results)]


# -- the reproduction ------------------------------------------------------------------------------------

def experiment_figures(exp: Any, focus_phase: str = "shuffled") -> list[Figure]:
    """Figures of ``docs/reproduction.md`` from a ``reproductions.flowtracer16.Experiment``."""
    return [reduction_hist(exp), fim_by_strategy(exp), completion_by_strategy(exp),
            *[link_loads(c.fixed, c.conditions, f"repro-links-{p.phase.key}-{i}", svg=False)
              for p in exp.phases if p.phase.key == focus_phase for i, c in enumerate(p.cells[:2])]]


def _grid(exp: Any, plt: Any, height: float) -> tuple[Any, Any]:
    rows, cols = len(exp.phases), max(len(p.cells) for p in exp.phases)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, height * rows), squeeze=False)
    return fig, axes


def reduction_hist(exp: Any) -> Figure:
    """Per-draw FIM reduction of static pinning against ECMP, per phase and conditions, with the paper's 30%."""
    from flowtracer.whatif.reproductions.flowtracer16 import PAPER_REDUCTION, STATICS

    plt = pyplot()
    fig, axes = _grid(exp, plt, 2.6)
    bins = [x / 10 for x in range(-15, 11)]
    for ri, p in enumerate(exp.phases):
        for ci, c in enumerate(p.cells):
            ax = axes[ri][ci]
            for si, name in enumerate(STATICS):
                vals = [max(-1.45, r) for r in c.static_reduction[name] if r is not None]  # in both first bins
                shifted = [b + 0.02 * si for b in bins]  # identical histograms stay visible side by side
                ax.hist(vals, bins=shifted, histtype="step", lw=1.6, color=PALETTE[si], label=name)
                base = c.static_reduction[name][0]
                if base is not None:
                    ax.axvline(max(-1.5, base), color=PALETTE[si], ls=":", lw=1.2)
            ax.axvline(PAPER_REDUCTION, color="#e15759", lw=1.5)
            ax.text(PAPER_REDUCTION, ax.get_ylim()[1] * 0.95, " FlowTracer 30%", color="#e15759", fontsize=7,
                    va="top")
            ax.set_title(f"{p.phase.title}\n{c.conditions}", fontsize=8, loc="left")
            ax.set_xlim(-1.55, 1.05)
            if ri == len(exp.phases) - 1:
                ax.set_xlabel("FIM reduction vs ECMP (1 - static/ECMP)")
            if ci == 0:
                ax.set_ylabel(f"ECMP draws (of {exp.draws})")
    axes[0][0].legend(frameon=False, fontsize=7, loc="upper left")
    fig.tight_layout()
    return render(fig, "repro-fim-reduction",
                  f"FIM reduction of static destination pinning against each of {exp.draws} ECMP realizations "
                  "(job restarts: new QP numbers, so new UDP source ports); dotted: against the recorded run; "
                  "red: FlowTracer's reported 30%. Reductions below -150% are drawn at -150%.", svg=False)


def _by_strategy(exp: Any, metric: str, name: str, ylabel: str, caption: str, relative: bool) -> Figure:
    """Per phase and conditions: a dot per strategy, and boxes over restarts for the ones that vary."""
    from flowtracer.whatif.reproductions.flowtracer16 import DRAWN, FIXED

    plt = pyplot()
    fig, axes = _grid(exp, plt, 3.0)
    for ri, p in enumerate(exp.phases):
        ref = p.cells[0].result("ecmp").completion_s if relative else 1.0
        for ci, c in enumerate(p.cells):
            ax = axes[ri][ci]
            for i, s in enumerate(FIXED):
                color = PALETTE[i % len(PALETTE)]
                if s in DRAWN:
                    vals = [v / ref for v in c.draws[s][metric] if math.isfinite(v)]
                    ax.boxplot([vals], positions=[i], widths=0.6, showfliers=True, patch_artist=True,
                               boxprops={"facecolor": color, "alpha": 0.35}, medianprops={"color": "#222"},
                               flierprops={"markersize": 2})
                r = c.result(s)
                v = getattr(r, metric)
                if math.isfinite(v):
                    ax.plot([i], [v / ref], "o", color=color, ms=5, mec="#222", mew=0.6)
            ax.set_xticks(range(len(FIXED)))
            ax.set_xticklabels(FIXED, rotation=55, ha="right", fontsize=7)
            ax.set_xlim(-0.6, len(FIXED) - 0.4)
            ax.set_title(f"{p.phase.title}\n{c.conditions}", fontsize=8, loc="left")
            if ci == 0:
                ax.set_ylabel(ylabel)
            if metric == "fim":
                ax.set_ylim(-0.03, 1.03)
    fig.tight_layout()
    return render(fig, name, caption, svg=False)


def fim_by_strategy(exp: Any) -> Figure:
    return _by_strategy(exp, "fim", "repro-fim-strategies", "fabric FIM (bytes)",
                        f"Fabric FIM per strategy. Dots: the recorded QP numbers; boxes: {exp.draws} job restarts "
                        "(new QP numbers) for the strategies that depend on them.", relative=False)


def completion_by_strategy(exp: Any) -> Figure:
    return _by_strategy(exp, "completion_s", "repro-completion", "time / ECMP healthy",
                        "Estimated communication time of the recorded volume per strategy, relative to ECMP as "
                        "recorded on the healthy fabric (max-min fair sharing; lower is better).", relative=True)
