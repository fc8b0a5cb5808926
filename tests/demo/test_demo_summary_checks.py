"""The summary judges every figure it prints against ground truth and names the ones that failed (issue 27, item 4).

"Consistent with ground truth" must judge every figure, not the measured fabric FIM alone: otherwise a run whose
attributed FIM is off by 0.0535 (tolerance 0.02) would be called consistent.
"""

from __future__ import annotations

from flowtracer.demo.status import Observed
from flowtracer.demo.summary import fim_section, ground_truth_checks, summary_lines
from flowtracer.sim.fabric.ground_truth import GroundTruth

S = 1_000_000_000
T0 = 1_800_000_000 * S


def _ground_truth(ticks: int) -> GroundTruth:
    """One ECMP group whose two members carry 100 bytes each per tick: fabric FIM 0."""
    rec = [{"start_ns": T0 + i * S, "end_ns": T0 + (i + 1) * S, "flows": [], "links": [],
            "groups": {"leaf01:spine01|spine02": [100, 100]}} for i in range(ticks)]
    return GroundTruth({"tick_ns": S, "start_ns": T0}, {}, {}, rec, [], [])


def _observed(attributed: float) -> Observed:
    obs = Observed(switch_names=frozenset({"leaf01"}))
    for i in range(1, 21):
        obs.switches[T0 + i * S] = {"leaf01"}
        obs.fabric_fim[T0 + i * S] = {"measured": 0.0, "attributed": attributed}
    return obs


def test_the_fim_verdict_covers_the_attributed_basis_and_says_it_failed() -> None:
    vs = fim_section(_observed(0.0535), _ground_truth(20), rolling_s=2.0)["vs_ground_truth"]
    assert vs["windows_compared"] > 0 and vs["max_abs_error_measured"] == 0.0
    assert not vs["consistent"] and vs["failed"] == ["attributed"]
    ok = fim_section(_observed(0.01), _ground_truth(20), rolling_s=2.0)["vs_ground_truth"]
    assert ok["consistent"] and ok["failed"] == []


def _summary(attributed_err: float, path_err: float, link_err: float) -> dict:
    return {"fabric_fim": {"vs_ground_truth": {"windows_compared": 40, "max_abs_error_measured": 0.001,
                                               "max_abs_error_attributed": attributed_err, "tolerance": 0.02}},
            "scores": {"paths": {"windows_scored": 40, "path_load_error": path_err},
                       "links": {"link_windows": 1920, "error": link_err}}}


def test_every_figure_is_judged_and_the_failed_ones_are_named() -> None:
    v = ground_truth_checks(_summary(0.0535, 0.07, 0.0))
    assert [c["figure"] for c in v["checks"]] == ["fabric_fim_measured", "fabric_fim_attributed", "path_loads",
                                                   "link_loads"]
    assert not v["consistent"] and v["failed"] == ["fabric_fim_attributed", "path_loads"]
    line = summary_lines_checks(v)
    assert line.startswith("NOT consistent with ground truth: fabric_fim_attributed 0.0535 > 0.02")
    assert "path_loads 0.0700 > 0.05" in line
    good = ground_truth_checks(_summary(0.0125, 0.0, 0.0))
    assert good["consistent"] and good["failed"] == []


def test_nothing_compared_is_not_consistent() -> None:
    v = ground_truth_checks({"fabric_fim": {"vs_ground_truth": {"windows_compared": 0, "tolerance": 0.02}}})
    assert v == {"consistent": False, "failed": [], "checks": []}


def summary_lines_checks(v: dict) -> str:
    """The summary's terminal line about the checks (summary_lines renders it after the scores)."""
    s = {"fabric_fim": {"final": None, "vs_ground_truth": {}}, "collisions": [], "faults": [],
         "pipeline": {"fabric_windows": 0, "dead_letters": 0,
                      "latency_window_end_to_kafka": {"p50_s": None, "p99_s": None}},
         "vs_ground_truth": v}
    [line] = [x for x in summary_lines(s) if "consistent with ground truth" in x]
    return line
