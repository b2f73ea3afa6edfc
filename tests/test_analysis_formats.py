"""The moderated and judge-refined formats load into the same tables as the
drift format, with stages and motions as columns, and their own process
signals (fact-check failures, strikes, motion distance) agree with counts
taken from the JSONL files."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd

from analysis import compute_signals, load_runs

MODERATED = (
    "format=moderated",
    "model.factcheck_fail_rate=0.4",
    "format.max_strikes=9",
    "format.exchanges=2",
)
JUDGE_REFINE = ("format=judge_refine", "rounds=3")


def jsonl(path):  # type: ignore[no-untyped-def]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_moderated_speeches_are_turns_with_stages_and_checked_drafts(run):
    run_dir = run(*MODERATED).run_dir
    t = load_runs(run_dir, cache=False)
    assert t.turns.stage.tolist() == ["opening", "rebuttal", "counter", "rebuttal", "counter", "closing"]
    assert set(t.turns.kind) == {"speech"} and t.turns.fact_check_id.notna().all()
    checks = jsonl(run_dir / "public" / "factchecks.jsonl")
    drafts = t.drafts.set_index("draft_id")
    for c in checks:  # each draft is judged by its own fact-check
        assert drafts.loc[c["draft_id"], "approved"] == (c["verdict"] == "pass")
        assert drafts.loc[c["draft_id"], "checker"] == "fact_checker"
    anchors = t.personas.set_index("team")
    assert anchors.loc["pro", "kind"] == "stance" and anchors.loc["pro", "persona"].startswith(
        "FOR the motion"
    )
    public = t.public
    assert (public.kind == "fact_check").sum() == len(checks) and (public.kind == "verdict").sum() == 1
    runs = t.runs.iloc[0]
    assert runs["counts.usage_by_role.fact_checker.calls"] == len(checks)
    assert runs["counts.usage_by_stage.opening.calls"] > 0


def test_fact_check_failure_rate_and_strikes_match_the_logs(run):
    run_dir = run(*MODERATED).run_dir
    sig = compute_signals(load_runs(run_dir, cache=False), progress=False).turns
    checks = pd.DataFrame(jsonl(run_dir / "public" / "factchecks.jsonl"))
    strikes = [e for e in jsonl(run_dir / "events.jsonl") if e["event"] == "strike"]
    assert strikes  # the seed fails some checks, so the signals have something to count
    for row in sig.itertuples():
        mine = checks[(checks["round"] == row.round) & (checks.team == row.team)]
        assert row.factcheck_fail_rate == (mine.verdict == "fail").mean()
        taken = sum(1 for e in strikes if e["team"] == row.team and e["round"] <= row.round)
        assert row.strikes_so_far == taken
    assert sig.motion_distance.isna().all() and sig.rejection_rate.isna().all()  # no critic, no motion


def test_judge_refine_turns_carry_the_motion_and_its_distance_grows_from_zero(run):
    run_dir = run(*JUDGE_REFINE).run_dir
    t = load_runs(run_dir, cache=False)
    assert t.turns.stage.tolist() == ["argument", "answer"] * 3
    original = t.turns.original_motion.iloc[0]
    assert (t.turns.original_motion == original).all()
    motions = [m["motion"] for m in jsonl(run_dir / "public" / "motions.jsonl")]
    assert t.turns.motion.tolist() == [original] * 2 + [m for m in motions for _ in range(2)]
    assert len(t.drafts) == 6 and t.drafts.published.all()  # each turn is its own draft
    assert set(t.public.kind) >= {"evaluation", "motion"}
    sig = compute_signals(t, progress=False).turns
    distance = sig.groupby("round").motion_distance.first()
    assert distance[1] == 0.0 and distance[2] > 0 and distance[3] > 0
    assert sig.factcheck_fail_rate.isna().all() and sig.strikes_so_far.isna().all()


def test_four_formats_analyse_as_one_root(run, tmp_path):
    root = tmp_path / "mixed"
    for args in (MODERATED, JUDGE_REFINE, ("rounds=2",), ("format=panel", "model.synthesize_rate=1.0")):
        shutil.copytree(run(*args).run_dir, root / args[0].replace("=", "-"))
    t = load_runs(root, cache=False)
    assert sorted(t.runs.format) == ["drift", "judge_refine", "moderated", "panel"]
    sig = compute_signals(t, progress=False).turns
    assert len(sig) == len(t.turns) and sig.sem_anchor_sim.notna().all()
    assert not any(math.isnan(x) for x in sig.n_words)


def test_early_late_leaves_out_a_side_that_spoke_in_one_phase_only(run):
    """A moderated side can speak only early or only late (one speech a round):
    it has no early-late difference, and the table leaves it out instead of failing."""
    from analysis import early_late, score

    run_dir = run("format=moderated", "model.factcheck_fail_rate=0.0", "format.exchanges=1").run_dir
    t = load_runs(run_dir.parent, cache=False)
    scores = score(compute_signals(t, progress=False).turns)
    table = early_late(scores, t.runs)  # raised KeyError: 'early' before
    assert set(table.team) < set(scores.team)  # a side is left out, not the table
    assert table.early_mean.notna().all() and table.late_mean.notna().all()
