"""Paired analysis of forks (analysis.pairs, analysis.paired): siblings and
their pairs, divergence from the fork round, the sign-flip test, paired
power, and the ``pairs`` and ``power --paired`` commands."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from synthetic import write_run
from test_fork import FORMATS, fork, start

from analysis.__main__ import main
from analysis.compare import holm
from analysis.paired import (
    first_reachable_pairs,
    paired_power,
    paired_summary,
    required_pairs,
    sign_flip_p,
    smallest_paired_p,
)
from analysis.pairs import (
    PARENT,
    caveats,
    condition_text,
    find_pairs,
    format_pairs,
    load_pairs,
    pair_values,
    paired_contrasts,
)
from analysis.pairs import divergence as divergence_of
from harness.store.records import Lineage
from harness.store.rundir import read_manifest, write_manifest

CALM = "We weigh the evidence carefully and find a modest benefit for workers and families in most cases."
ANGRY = "This is absurd nonsense and furious outrage, never acceptable, always stupid, a ridiculous mockery!"
TEAMS = ("pros", "cons")
ROUNDS, AT = 5, 3  # forked after round 3: the opening (2 turns with a value) lies in the prefix


def shuffled(rng: random.Random, text: str) -> str:
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def write_family(root: Path, seed: int) -> None:
    """A calm parent, and two forks at AT: x=0 stays calm, x=1 turns angry."""
    rng = random.Random(seed)
    turns = [(r, t, shuffled(rng, CALM)) for r in range(1, ROUNDS + 1) for t in TEAMS]
    parent = write_run(root / f"p{seed}", turns, config={"seed": seed})
    for x, text in ((0, CALM), (1, ANGRY)):
        rest = [(r, t, shuffled(rng, text)) for r in range(AT + 1, ROUNDS + 1) for t in TEAMS]
        fork = write_run(root / f"p{seed}-x{x}", [a for a in turns if a[0] <= AT] + rest, config={"x": x})
        manifest = read_manifest(fork)
        manifest.lineage = Lineage(
            parent=str(parent),
            parent_run_id=parent.name,
            parent_fingerprint="f",
            at_round=AT,
            changed={"x": x},
            prefix_sha256="0",
        )
        write_manifest(fork, manifest)


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("forks")
    for seed in range(6):
        write_family(root, seed)
    return root


@pytest.fixture(scope="module")
def loaded(forks: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return load_pairs(forks, "hash", cache=False)


def test_sign_flip_p_is_the_hand_count():
    diffs = np.array([1.0, 2.0, 3.0, 4.0])  # every flip but none has a smaller mean; the mirror as large
    assert sign_flip_p(diffs) == (pytest.approx(2 / 16), "exact, 16 flips")
    assert sign_flip_p(diffs, alternative="greater")[0] == pytest.approx(1 / 16)
    assert sign_flip_p(-diffs, alternative="greater")[0] == pytest.approx(1.0)
    # 0.5 of 1, 2 and -0.5 of 1: means of the 8 flips as large as |1| are those with |sum| >= 3
    assert sign_flip_p(np.array([1.0, 2.0, -0.5]))[0] == pytest.approx(4 / 8)
    p, method = sign_flip_p(np.full(16, 1.0) + np.arange(16) / 100, resamples=999)
    assert method == "monte carlo, 999 flips" and p == pytest.approx(1 / 1000)  # 2^16 flips: sampled
    assert smallest_paired_p(5) == 2 / 32 and smallest_paired_p(5, one_sided=True) == 1 / 32
    assert first_reachable_pairs() == 6 and first_reachable_pairs(one_sided=True) == 5
    with pytest.raises(ValueError, match="alternative 'up'"):
        sign_flip_p(diffs, alternative="up")


def test_paired_summary_gives_the_t_interval_and_d_z():
    diffs = np.array([0.2, 0.5, 0.1, 0.4, 0.3, 0.6])
    s = paired_summary(diffs, resamples=500)
    t = stats.ttest_1samp(diffs, 0.0)
    assert s["mean_diff"] == pytest.approx(0.35) and s["dz"] == pytest.approx(0.35 / diffs.std(ddof=1))
    assert (s["t_low"], s["t_high"]) == pytest.approx(tuple(t.confidence_interval()))
    assert s["t_p"] == pytest.approx(t.pvalue) and s["perm_p"] == pytest.approx(2 / 64)
    assert s["boot_low"] < 0.35 < s["boot_high"]


def t_power(n: int, dz: float) -> float:
    """The two-sided paired t-test's power: the sign-flip test's should be close."""
    df, ncp = n - 1, dz * math.sqrt(n)
    crit = stats.t.ppf(0.975, df)
    return float(1 - stats.nct.cdf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp))


def test_paired_power_is_the_sign_flip_tests_and_finds_the_pairs_needed():
    assert paired_power(5, 10.0) == 0.0  # two-sided, 5 pairs: p never below 0.0625
    assert paired_power(5, 10.0, one_sided=True) > 0.99
    assert paired_power(10, 0.0) == pytest.approx(0.05, abs=0.02)  # its size at no effect
    assert paired_power(10, 1.0) == pytest.approx(t_power(10, 1.0), abs=0.03)
    assert paired_power(20, 0.6) == pytest.approx(t_power(20, 0.6), abs=0.03)  # monte carlo flips
    n, reached = required_pairs(1.0, n_max=30)
    assert reached >= 0.8 > paired_power(n - 1, 1.0)
    assert required_pairs(0.0)[0] is None and required_pairs(-1.0, one_sided=True)[0] is None


def test_siblings_pair_by_parent_and_fork_round(loaded):
    sibs, pairs, _ = loaded
    assert sorted(sibs.condition.unique()) == sorted([PARENT, "x=0", "x=1"])
    assert pairs.groupby("contrast").size().to_dict() == {
        f"k={AT}: x=0 - {PARENT}": 6,
        f"k={AT}: x=1 - {PARENT}": 6,
        f"k={AT}: x=1 - x=0": 6,
    }
    assert (pairs.run_a.str.replace(r"-x\d$", "", regex=True) == pairs.parent).all()


def branch(name: str, parent: str | None = None, k: int = 2, changed: str = "{}") -> dict:
    """A runs-table row: a fork of ``parent`` (a folder) at k, or a run that is none."""
    lineage = {
        "parent": parent,
        "parent_run_id": parent and Path(parent).name,
        "at_round": k,
        "changed": changed,
    }
    return {"run_id": name, "run_name": Path(name).name, **{f"lineage.{k}": v for k, v in lineage.items()}}


def test_siblings_share_a_parent_folder_and_a_fork_round():
    runs = pd.DataFrame(
        [branch("plain"), branch("f1", "/gone/p", 2, '{"x": 1}'), branch("f3", "/gone/p", 3, '{"x": 2}')]
    )
    assert find_pairs(runs).empty  # a parent not loaded, and forks at different rounds: no pair
    pair = find_pairs(pd.concat([runs, pd.DataFrame([branch("f2", "/gone/p", 2, '{"x": 2}')])]))
    assert pair[["contrast", "parent", "run_a", "run_b"]].values.tolist() == [
        ["k=2: x=2 - x=1", "/gone/p", "f1", "f2"]
    ]
    # two sweeps' cells of one name are two parents, told apart by their folders
    runs = pd.DataFrame(
        [
            branch("s1/seed-1"),
            branch("s2/seed-1"),
            branch("f/a", "/r/s1/seed-1"),
            branch("f/b", "/r/s2/seed-1"),
        ]
    )
    dirs = {"s1/seed-1": Path("/r/s1/seed-1"), "s2/seed-1": Path("/r/s2/seed-1")}
    pairs = find_pairs(runs, dirs)
    assert pairs[["parent", "run_a", "run_b"]].values.tolist() == [
        ["s1/seed-1", "s1/seed-1", "f/a"],
        ["s2/seed-1", "s2/seed-1", "f/b"],
    ]
    assert find_pairs(runs.iloc[[0, 2]]).run_a.tolist() == ["s1/seed-1"]  # moved: found by its unique name
    changed = '{"critic.name": "strict", "critic.max_iterations": 4, "seed": 7}'
    assert condition_text(changed) == "critic=strict, seed=7" and condition_text(None) == PARENT


def test_a_fork_grids_replicates_are_one_condition_paired_at_their_seed():
    """``harness.fork -m <p> --at-round 2 critic=strict,lenient replicates=2``: each replicate
    but the first was a condition of its own ('critic=strict, replicate=1, replicates=2,
    seed=870350057', 24 contrasts of 1-3 pairs for 3 parents), and two conditions'
    replicates were paired every way (4 pairs a parent, each branch in two)."""

    def rep(name: str, critic: str, r: int, seed: int) -> dict:
        changed = {"critic.name": critic, "replicates": 2} | ({"replicate": r, "seed": seed} if r else {})
        return branch(name, "/r/p", 2, json.dumps(changed)) | {"seed": seed}

    runs = pd.DataFrame(
        [branch("p") | {"seed": 1}]
        + [rep(f"{c[0]}{r}", c, r, seed) for c in ("strict", "lenient") for r, seed in ((0, 1), (1, 77))]
    )
    pairs = find_pairs(runs, {"p": Path("/r/p")})
    assert pairs.groupby("contrast")[["run_a", "run_b"]].apply(lambda g: g.values.tolist()).to_dict() == {
        f"k=2: critic=lenient - {PARENT}": [["p", "l0"], ["p", "l1"]],
        f"k=2: critic=strict - {PARENT}": [["p", "s0"], ["p", "s1"]],
        "k=2: critic=strict - critic=lenient": [["l0", "s0"], ["l1", "s1"]],
    }


def test_the_fork_round_column_is_one_dtype_however_the_runs_load(tmp_path):
    """``lineage.at_round`` was int64 for forks alone, object beside runs that are no
    fork, and float64 read back from the cache: now nullable Int64 each time."""
    from analysis.load import load_runs

    write_family(tmp_path / "tree", 0)
    forks_only = tmp_path / "forks"
    forks_only.mkdir()
    shutil.copytree(tmp_path / "tree" / "p0-x0", forks_only / "p0-x0")
    loads = [load_runs(forks_only, cache=False), load_runs(tmp_path / "tree", cache=False)]
    loads += [load_runs(tmp_path / "tree"), load_runs(tmp_path / "tree")]  # built, then from the cache
    assert loads[-1].cache_hits == 3
    for tables in loads:
        column = tables.runs.set_index("run_name")["lineage.at_round"]
        assert column.dtype == "Int64" and column["p0-x0"] == AT
    assert pd.isna(loads[-1].runs.set_index("run_name")["lineage.at_round"]["p0"])


def test_divergence_is_zero_at_the_fork_round_and_the_change_shows_after(loaded):
    _, pairs, values = loaded
    div = divergence_of(values, pairs)
    assert set(div.since_fork) == {0, 1, ROUNDS - AT}
    at_fork = div[div.since_fork == 0]
    assert at_fork["diff"].abs().max() == 0.0  # the same turns, the same opening: every signal equal
    assert {"drift_index", "affect", "vader_compound"} <= set(div.signal)
    drift = pair_values(div)
    angry = drift[drift.contrast.str.contains("x=1")]
    assert (angry["diff"] > 0.5).all()  # the angry branch drifts away from the calm prefix
    final = pair_values(div, final=True)
    keys = ["contrast", "run_b"]
    last = div[(div.signal == "drift_index") & (div["round"] == ROUNDS)].groupby(keys)["diff"].mean()
    assert final.set_index(keys)["diff"].loc[last.index].to_numpy() == pytest.approx(last.to_numpy())


def test_contrasts_are_tested_paired_with_holm_across_them(loaded):
    _, pairs, values = loaded
    table = paired_contrasts(pair_values(divergence_of(values, pairs)), resamples=500).set_index("contrast")
    effect, null = table.loc[f"k={AT}: x=1 - x=0"], table.loc[f"k={AT}: x=0 - {PARENT}"]
    assert (
        effect.n == 6 and effect.perm_method == "exact, 64 flips" and effect.perm_p == pytest.approx(2 / 64)
    )
    assert effect.t_low > 0 and null.t_low < 0 < null.t_high and null.perm_p > 0.2
    assert table.holm_p.to_numpy() == pytest.approx(holm(table.perm_p))


def test_pairs_and_paired_power_commands(forks, capsys):
    assert main(["pairs", str(forks), "--embedder", "hash", "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "18 pairs in 3 contrasts, from 6 parents" in out and "exact, 64 flips" in out
    assert "note: at the fork round" not in out  # forked at 3: the prefix holds the opening
    assert (forks / "_analysis" / "branches.png").is_file()
    assert set(pd.read_parquet(forks / "_analysis" / "pairs.parquet").contrast) == {
        f"k={AT}: x=0 - {PARENT}",
        f"k={AT}: x=1 - {PARENT}",
        f"k={AT}: x=1 - x=0",
    }
    args = ["power", "--paired", "--pilot", str(forks), "--embedder", "hash", "--d", "1", "--sims", "500"]
    assert main([*args, "--n-max", "30"]) == 0
    out = capsys.readouterr().out
    assert "5 pairs: 0.0625 > α: unreachable" in out and "sign-flip test over pairs" in out
    assert main(["pairs", str(forks), "--embedder", "hash", "--value", "nope"]) == 2
    assert "--value nope: not a signal" in capsys.readouterr().err
    assert main([*args, "--metric", "wall_s"]) == 2
    # the whole analysis draws the branches too, among its figures
    assert main([str(forks), "--embedder", "hash", "--no-progress"]) == 0
    assert (forks / "_analysis" / "figures" / "fork_branches.png").is_file()


def test_pairs_names_the_pairs_it_reads_short_or_leaves_out(tmp_path, capsys):
    """A killed fork's pair compares only the rounds it reached, and a fork at its parent's
    last round has no round after it: both went into '3 pairs in 2 contrasts' unsaid
    (the second dropped from the tests), and float noise at the fork round (4e-9) made
    the note 'the pairs differ by up to 0.000'."""
    for seed in (0, 1):
        write_family(tmp_path, seed)
    killed = read_manifest(tmp_path / "p1-x1")
    killed.status = "interrupted"
    write_manifest(tmp_path / "p1-x1", killed)
    last = read_manifest(tmp_path / "p0-x0").model_copy(deep=True)
    assert last.lineage is not None
    last.lineage.at_round, last.lineage.changed = ROUNDS, {"x": 9}
    shutil.copytree(tmp_path / "p0", tmp_path / "p0-x9")
    write_manifest(tmp_path / "p0-x9", last)
    assert main(["pairs", str(tmp_path), "--embedder", "hash", "--resamples", "200", "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert "note: 1 branch(es) in these pairs did not complete: p1-x1 (interrupted); their pairs" in out
    assert (
        f"note: 1 pair(s) have no round after the fork in both branches, and are left out of the tests: "
        f"k={ROUNDS}: x=9 - {PARENT} (p0, p0-x9)"
    ) in out
    noise = pd.DataFrame({"contrast": ["c"], "parent": ["p"], "+0": [4e-9], "+1": [0.2]})
    assert "note: at the fork round" not in format_pairs(noise, pd.DataFrame(), noise, "drift_index")
    noise["+0"] = 0.02
    assert "differ by up to 0.02:" in format_pairs(noise, pd.DataFrame(), noise, "drift_index")


def test_a_branch_killed_with_kill_9_is_not_said_to_be_running():
    """A parent or fork killed with kill -9 keeps the manifest it started with: pairs'
    note said 'p (running)' of a run nothing ran; it now says it as harness.export does."""
    sibs = pd.DataFrame({"run_id": ["p", "f"], "status": ["running", "interrupted"]})
    pairs = pd.DataFrame(
        [{"contrast": "k=1: x=1 - (parent)", "at_round": 1, "parent": "p", "run_a": "p", "run_b": "f"}]
    )
    div = pairs.assign(since_fork=1)
    (note,) = caveats(sibs, pairs, div)
    assert "did not complete: p (running, or was killed), f (interrupted); their pairs" in note


def test_runs_without_forks_say_so(tmp_path, capsys):
    write_run(tmp_path / "plain", [(1, "pros", CALM), (1, "cons", CALM)])
    assert main(["pairs", str(tmp_path), "--embedder", "hash"]) == 0
    assert "no forks with a sibling found" in capsys.readouterr().out


def test_real_forks_of_every_format_pair_and_diverge_only_after_the_fork(tmp_path, search_cache):
    """One scripted parent a format, forked at round 2 hotter (the scripted model
    restyles its words above T=0.7): each format gives one pair, the same
    text signals at the fork round and different ones after it. (A panel that
    synthesizes at round 2 has no round after it: its judge never does here.)"""
    for name, overrides in FORMATS.items():
        extra = {"grounded": [f"search.cache_dir={search_cache}"], "panel": ["model.synthesize_rate=0"]}
        parent = start(tmp_path, name, "rounds=3", *overrides, *extra.get(name, []))
        fork(parent, 2, "llm.temperature=1.5", root=tmp_path)
    _, pairs, values = load_pairs(tmp_path, "hash", cache=False)
    assert sorted(pairs.parent) == sorted(FORMATS) and set(pairs.b) == {"llm.temperature=1.5"}
    div = divergence_of(values, pairs)
    words = div[div.signal == "n_words"].groupby(["parent", "since_fork"])["diff"]
    moved = words.apply(lambda d: d.abs().max()).unstack("since_fork")
    assert (moved[0] == 0).all() and (moved[1] > 0).all(), moved  # the same turns, then hotter ones
    table = paired_contrasts(pair_values(div), resamples=200)
    assert table.n.tolist() == [len(FORMATS)] and table.perm_method.tolist() == ["exact, 32 flips"]
