"""``flowtracer whatif --experiment prime-spray``: the spraying family on PRIME's scenarios, end to end through the
CLI on a small fabric: the JSON and Markdown reports, the comparison with the paper checked against the JSON's own
numbers and against the model run directly, and bad options."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowtracer.cmd_whatif import whatif
from flowtracer.whatif.reproductions.spray_paths import KINDS
from flowtracer.whatif.reproductions.spray_scenarios import SCENARIO_KEYS, scenarios
from flowtracer.whatif.reproductions.spray_sim import LeafSpine, simulate

SMALL = ["--experiment", "prime-spray", "--fabric", "2x4x2", "--packets", "96", "--seed", "0", "--seed", "1"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    out = tmp_path_factory.mktemp("spray")
    r = CliRunner().invoke(whatif, [*SMALL, "--json", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    return doc, (out / "prime-spray.md").read_text(), out


def test_every_kind_on_every_scenario_with_fct_tails_and_reordering(report: tuple[dict, str, Path]) -> None:
    doc, page, out = report
    assert json.loads((out / "prime-spray.json").read_text()) == doc
    assert (doc["fabric"], doc["packets"], doc["seeds"]) == ("2x4x2", 96, [0, 1])
    assert [(r["scenario"], r["kind"]) for r in doc["results"]] == [
        (s, k) for s in SCENARIO_KEYS.values() for k in KINDS]
    for r in doc["results"]:
        assert len(r["seeds"]) == 2 and r["unfinished"] == 0
        assert 0 < r["fct_p50_us"] <= r["fct_p99_us"] and math.isfinite(r["fct_p99_us"])
        # A flow of 96 packets needs at least 96 slots of 81.92 ns.
        assert r["fct_p50_us"] >= 96 * 4096 * 8 / 400e9 * 1e6
        assert 0.0 <= r["reorder_fraction"] <= 1.0 and r["reorder_p99"] >= 0.0
        assert r["fct_p99_us"] == pytest.approx(sum(s["fct_p99_us"] for s in r["seeds"]) / 2)
        if r["kind"] == "random":
            assert r["reorder_fraction"] > 0.0  # random spraying over queues of different depths reorders
        assert (f"| {r['scenario']} | {r['kind']} | {r['throughput']:.3f} | {r['fct_p50_us']:.1f} "
                f"| {r['fct_p99_us']:.1f} |") in page


def test_seed_figures_are_the_models_own(report: tuple[dict, str, Path]) -> None:
    """The JSON's per-seed numbers are what the model gives when run directly (seed 1, degraded link, PRIME)."""
    doc, _, _ = report
    sc = scenarios(LeafSpine(leaves=2, spines=4, hosts_per_leaf=2), 96, seed=1)[1]
    direct = simulate(sc.fabric, sc.flows, "prime", sc.faults, seed=1)
    row = next(r for r in doc["results"] if (r["scenario"], r["kind"]) == (sc.name, "prime"))
    assert row["seeds"][1]["fct_p99_us"] == pytest.approx(direct.fct_us(99))
    assert row["seeds"][1]["reorder_fraction"] == pytest.approx(direct.reorder_fraction)


def test_comparison_rows_follow_from_the_json(report: tuple[dict, str, Path]) -> None:
    doc, page, _ = report
    assert "arXiv 2507.23012" in doc["paper"]["source"]
    rows = {c["scenario"]: c for c in doc["comparison"]}
    assert list(rows) == list(SCENARIO_KEYS.values())
    assert (rows["permutation"]["paper"], rows["degraded link"]["paper"]) == (0.15, -0.27)
    for scenario, c in rows.items():
        values = {r["kind"]: r[c["metric"]] for r in doc["results"] if r["scenario"] == scenario}
        prime = values.pop("prime")
        ranked = sorted(values.values(), reverse=c["metric"] == "throughput")  # best first
        assert c["prime"] == prime
        assert c["vs_best"] == pytest.approx(prime / ranked[0] - 1, abs=1e-12)
        assert c["vs_worst"] == pytest.approx(prime / ranked[-1] - 1, abs=1e-12)
        assert values[c["best"]] == ranked[0] and values[c["worst"]] == ranked[-1]
        assert c["prime_beats_all"] == (c["vs_best"] > 0 if c["metric"] == "throughput" else c["vs_best"] < 0)
        assert f"| {scenario} |" in page and f"{c['vs_best']:+.1%} ({c['best']})" in page


@pytest.mark.parametrize(("args", "message"), [
    (["--fabric", "1x4x4"], "--fabric '1': needs a whole number of at least 2"),
    (["--fabric", "4x4"], "--fabric '4x4': expected LEAVESxSPINESxHOSTS_PER_LEAF"),
    (["--packets", "0"], "--packets '0': needs a whole number of at least 1"),
    (["--seed", "x"], "--seed 'x': needs a whole number of at least 0"),
    (["--scenario", "storm"], "--scenario: unknown scenario 'storm'; known: permutation, degraded, failed, mixed"),
    (["--topology", "t.yaml"], "--topology does not apply to --experiment prime-spray"),
])
def test_bad_option_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    r = CliRunner().invoke(whatif, ["--experiment", "prime-spray", *args])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"flowtracer whatif: {message}")
    assert len(r.output.strip().splitlines()) == 1


def test_spray_option_without_the_experiment_is_refused() -> None:
    r = CliRunner().invoke(whatif, ["--topology", "t.yaml", "--input", "r.jsonl", "--seed", "3"])
    assert r.exit_code == 2 and r.output.strip() == "flowtracer whatif: --seed applies to --experiment prime-spray only"
