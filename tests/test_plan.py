"""harness.plan: the estimate against the run it plans, on the scripted model,
and what the plan prints for a grid and for a model with no price."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from conftest import compose_cfg

from harness import fork as fork_cli
from harness.engine import RunResult
from harness.engine.forking import fork_run
from harness.formats import get_format
from harness.models.prices import format_usd
from harness.plan import Plan, build_plan, dry, main, parse
from harness.plan.cli import render
from harness.plan.estimate import Tally, extrapolate
from harness.plan.totals import budget_lines
from harness.probes.questionnaire import questionnaire
from harness.runtime.interrupt import clear_stop, request_stop
from harness.schema import Config
from harness.store.reader import ledger
from harness.view.live import PLAN_JSON, time_left

# The point against the run, on the scripted model: it bills words, which the plan
# counts exactly, so what is left is extrapolation from the dry passes and the
# mean over their seeds; 5% leaves room for a seed's longer or shorter words.
TOLERANCE = 0.05


@pytest.mark.parametrize(
    "overrides",
    [
        # window 1: prompts stop growing at round 2, so rounds 4-6 are extrapolated from passes of 2 and 3
        ("rounds=6", "memory.window_rounds=1"),
        ("format=judge_refine", "rounds=6", "memory.window_rounds=1"),
    ],
    ids=["drift", "judge_refine"],
)
def test_plan_against_the_run_on_the_scripted_model(
    overrides: tuple[str, ...], run: Callable[..., RunResult]
) -> None:
    plan, passes = build_plan(parse(["model=scripted", *overrides]))
    assert passes >= 2 and plan.rows[0].estimate.units == 6
    close_to(plan, run(*overrides).run_dir)
    assert plan.low().output < plan.point().output < plan.high().output  # the interval is an interval


def close_to(plan: Plan, run_dir: Path) -> None:
    """The plan's point is within TOLERANCE of what ``run_dir`` billed, inside its interval."""
    actual = ledger(run_dir)
    point, low, high = plan.point(), plan.low(), plan.high()
    actuals = {"calls": actual.calls, "input": actual.input_tokens, "output": actual.output_tokens}
    for field, got in actuals.items():
        assert getattr(low, field) <= got <= getattr(high, field), field
        assert getattr(point, field) == pytest.approx(got, rel=TOLERANCE), field


def test_prompt_growth_is_extrapolated_until_the_window_is_full() -> None:
    """Passes of 2, 3 and 4 units whose prompts grow 10 tokens a unit until unit 6:
    carried to 10 units, as a brute-force sum of the units says."""

    def run_of(units: int) -> dict[str, Tally]:
        prompt = [50 + 10 * (min(u, 6) - 1) for u in range(1, units + 1)]
        return {"pros": Tally(calls=2 * units, input=sum(prompt), output=7 * units)}

    got = extrapolate([run_of(2), run_of(3), run_of(4)], first=2, target=10, plateau=6)["pros"]
    assert (got.calls, got.input, got.output) == (20, run_of(10)["pros"].input, 70)


def test_a_grid_prints_a_row_per_cell_and_the_totals(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-m", "model=scripted", "rounds=1", "llm.temperature=0.2,1.0", "sweep.concurrency=2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("plan: 2 cell(s), 2 in flight")
    rows = {line.split()[0]: line.split() for line in lines[2:] if line.startswith(("temp-", "total"))}
    assert set(rows) == {"temp-0.2", "temp-1.0", "total"}
    calls = [int(rows[name][3].replace(",", "")) for name in ("temp-0.2", "temp-1.0")]
    assert int(rows["total"][1].replace(",", "")) == sum(calls) > 0


def test_cells_on_an_embedded_model_take_turns_in_the_wall_time() -> None:
    # the in-process launcher runs them one at a time a driver process (they share its
    # llama.cpp model), so two in flight take two cells' time; two processes, one's
    grid = ["-m", "model=smollm2", "rounds=1", "seed=1,2", "sweep.concurrency=2", "--call-s", "1"]
    one, _ = build_plan(parse(grid))
    two, _ = build_plan(parse([*grid, "sweep.processes=2"]))
    assert one.wall_s == pytest.approx(sum(row.alone_s for row in one.rows))
    assert two.wall_s == pytest.approx(max(row.alone_s for row in two.rows))
    assert one.bound.startswith("embedded-model cells 1 at a time") and "on the embedded model" in one.bound


def test_a_model_with_no_price_is_unknown_never_zero(capsys: pytest.CaptureFixture[str]) -> None:
    priced = "prices.models={openai\\:priced-model:{input:1.0,output:2.0}}"
    cells = "model.spec=openai:priced-model,openai:no-such-model"
    assert main(["-m", "model=openai", cells, priced, "rounds=1"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith(("spec-", "total"))}
    assert len(rows) == 3
    unknown = next(line for name, line in rows.items() if "no-such-model" in name)
    known = next(line for name, line in rows.items() if "priced-model" in name)
    assert "unknown" in unknown and "$0 " not in unknown and "$0.0" in known
    assert "unknown" in rows["total"]
    assert "unknown: openai:no-such-model has no price; set prices.models=" in out


def test_a_bad_override_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["model=scripted", "rounds=abc"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: rounds:") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (("model=scripted", "model.latency_s=0.05"), "a call 0.05 s (the scripted model's model.latency_s)"),
        (("model=openai", "--call-s", "3"), "a call 3 s at the provider (--call-s)"),
    ],
    ids=["scripted", "remote"],
)
def test_the_wall_line_names_the_seconds_a_call_it_used(
    given: tuple[str, ...], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*given, "rounds=1"]) == 0
    wall = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("wall:"))
    assert said in wall


@pytest.mark.parametrize(("model", "said"), [("model=openai", True), ("model=scripted", False)])
def test_a_real_models_plan_without_a_pilot_says_it_is_uncalibrated(
    model: str, said: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([model, "rounds=1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("uncalibrated:")]
    assert len(lines) == int(said)
    assert all("--pilot" in line for line in lines)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_a_usage_and_exit_0(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model=scripted", flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m harness.plan")
    assert all(option in out for option in ("-m", "--call-s", "--count", "--pilot", "--record"))


# --- calibrating from a pilot ---------------------------------------------------------------


@pytest.fixture
def pilot(run: Callable[..., RunResult]) -> Callable[..., list[str]]:
    """Scripted pilot runs of 2 rounds, one a seed: ``--pilot`` arguments for each run folder."""

    def make(*overrides: str, seeds: tuple[int, ...] = (1, 2)) -> list[str]:
        folders = [
            run("rounds=2", f"seed={seed}", f"run_name=pilot-{seed}", *overrides).run_dir for seed in seeds
        ]
        return [arg for folder in folders for arg in ("--pilot", str(folder))]

    return make


def test_a_pilot_with_rejections_raises_the_calls_per_turn(
    pilot: Callable[..., list[str]], run: Callable[..., RunResult]
) -> None:
    """Every draft rejected once in the pilot: twice the debaters' and critics' calls a
    turn, which the dry passes alone never see; the pilot's plan meets a run that does it."""
    planned = ("model=scripted", "rounds=4")
    plain, _ = build_plan(parse(list(planned)))
    calibrated, _ = build_plan(parse([*planned, *pilot("model.reject_first=1")]))
    actual = ledger(run("rounds=4", "model.reject_first=1").run_dir)
    assert plain.point().calls < 0.6 * actual.calls
    assert calibrated.point().calls == pytest.approx(actual.calls, rel=TOLERANCE)
    assert calibrated.point().input == pytest.approx(actual.input_tokens, rel=0.15)
    assert calibrated.pilot is not None and len(calibrated.pilot.runs) == 2


def test_schema_failures_in_a_pilot_add_their_repairs(pilot: Callable[..., list[str]]) -> None:
    plain, _ = build_plan(parse(["model=scripted", "rounds=4"]))
    calibrated, _ = build_plan(parse(["model=scripted", "rounds=4", *pilot("model.malformed_rate=0.5")]))
    assert calibrated.point().calls > 1.2 * plain.point().calls
    # half a turn's replies malformed: turns within a run vary more than +-25%, which no pilot narrows
    wide = [line for line in render(calibrated, None, 0, 0.0) if "the interval is wide" in line]
    assert wide and "which more pilot runs do not narrow: 20 more would leave" in wide[0]


def width(plan_: Plan) -> float:
    return plan_.high().calls - plan_.low().calls


def test_the_interval_narrows_with_a_consistent_pilot(pilot: Callable[..., list[str]]) -> None:
    planned = ["model=scripted", "rounds=4"]
    worst, _ = build_plan(parse(planned))
    consistent, _ = build_plan(parse([*planned, *pilot("model.reject_first=1", seeds=(1, 2, 3))]))
    mixed = [*pilot("model.reject_first=0", seeds=(4,)), *pilot("model.reject_first=2", seeds=(5, 6))]
    inconsistent, _ = build_plan(parse([*planned, *mixed]))
    assert width(consistent) < width(inconsistent) < width(worst)
    low, high = consistent.low(), consistent.high()
    assert low.calls <= consistent.point().calls <= high.calls
    wide = [line for line in render(inconsistent, None, 0, 0.0) if "the interval is wide" in line]
    assert wide and "more pilot run(s) like these would narrow it" in wide[0]
    assert not [line for line in render(consistent, None, 0, 0.0) if "the interval is wide" in line]


def test_pilot_runs_that_differ_in_level_span_the_interval(pilot: Callable[..., list[str]]) -> None:
    """One pilot run's critic rejects every first draft (6 calls a turn), the other's none
    (3): a cell is a run, and a run keeps its level, so a cell's interval reaches both runs'
    levels. Turns pooled across the runs made a cell a mix of them, its 4 turns a seat
    drawn apart, and kept its interval inside the two levels."""
    planned = ["model=scripted", "rounds=4"]
    plain, _ = build_plan(parse(planned))
    level = [*pilot("model.reject_first=0", seeds=(1,)), *pilot("model.reject_first=1", seeds=(2,))]
    calibrated, _ = build_plan(parse([*planned, *level]))
    calls = plain.point().calls
    assert calibrated.point().calls == pytest.approx(1.5 * calls)
    assert calibrated.low().calls == pytest.approx(calls) and calibrated.high().calls == pytest.approx(
        2 * calls
    )


def test_one_pilot_run_has_a_spread_over_its_turns(
    pilot: Callable[..., list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """The interval is a bootstrap over the pilot's turns: one run whose turns differ (half
    its replies malformed, so repaired) gives one inside the worst case; one of 2 turns a
    seat is too few, and says so."""
    planned = ["model=scripted", "rounds=4"]
    worst, _ = build_plan(parse(planned))
    four = pilot("model.malformed_rate=0.5", "rounds=4", seeds=(1,))
    calibrated, _ = build_plan(parse([*planned, *four]))
    assert calibrated.low().calls < calibrated.point().calls < calibrated.high().calls
    assert width(calibrated) < width(worst)
    assert calibrated.pilot is not None and "pilot: 1 run, so the interval is its turns' spread alone" in (
        "\n".join(calibrated.pilot.lines())
    )
    main([*planned, *pilot("model.malformed_rate=0.5", seeds=(2,))])
    out = capsys.readouterr().out
    assert "pilot: 4 turns in 1 run(s), " in out and "2 turn(s) a seat are too few for a spread" in out


def test_a_pilot_run_named_twice_counts_once(
    pilot: Callable[..., list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    # named twice (its folder and its folder with a slash, or a sweep and a cell of it), one
    # run's 2 turns a seat were read as 2 runs' 4: a bootstrap spread it has no turns for
    (_, folder) = pilot(seeds=(1,))
    main(["model=scripted", "rounds=4", "--pilot", folder, "--pilot", f"{folder}/"])
    out = capsys.readouterr().out
    assert "calibrated from 1 pilot run(s)" in out and "pilot: 4 turns in 1 run(s), " in out
    assert "2 turn(s) a seat are too few for a spread" in out


BUDGET = ("prices.models={scripted\\:default:{input:1.0,output:4.0}}", "rounds=4", "run_name=cut")


@pytest.mark.parametrize("how", ["budget", "killed"])
def test_an_unfinished_pilot_counts_only_the_rounds_it_played(
    how: str, run: Callable[..., RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    """A pilot stopped by its budget after round 2 of 4 (and one killed there: its manifest
    still says running, at round 0): its rounds 3-4 are no turns, its unfinished round 3
    is left out, so its turns make the calls the dry passes make, as a whole pilot's do."""
    cut = run(*BUDGET, "budget.usd=0.005").run_dir
    if how == "killed":  # what a SIGKILL leaves: the manifest as the run wrote it at its start
        manifest = json.loads((cut / "manifest.json").read_text())
        manifest["status"], manifest["counts"]["rounds_completed"] = "running", 0
        (cut / "manifest.json").write_text(json.dumps(manifest))
    assert main(["model=scripted", "rounds=4", "--pilot", str(cut)]) == 0
    out = capsys.readouterr().out
    assert "pilot: 4 turns in 1 run(s), 3.0 calls a turn where the dry passes make 3.0" in out
    status = "running, or killed" if how == "killed" else "interrupted"
    assert f"pilot: {cut}: 2 of 4 rounds played ({status}), only its rounds 1-2 count" in out
    assert "the 2 call(s) of its unfinished round 3 left out" in out
    assert "past the first" not in out  # it played 2 rounds: its prompts grew


def test_a_pilot_that_played_one_round_of_more_says_its_prompts_did_not_grow(
    run: Callable[..., RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    """Set for 4 rounds, stopped by its budget after round 1: the 1-round line is read
    off the rounds it played, not the length it was set to."""
    cut = run(*BUDGET, "budget.usd=0.003").run_dir
    assert main(["model=scripted", "rounds=4", "--pilot", str(cut)]) == 0
    out = capsys.readouterr().out
    assert f"pilot: {cut}: 1 of 4 rounds played (interrupted)" in out
    assert "pilot: its runs played no round past the first, so later rounds' prompts grow" in out


def test_a_pilot_that_played_no_round_is_one_line_naming_it(
    run: Callable[..., RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    cut = run(*BUDGET, "budget.usd=0.002").run_dir  # stops inside round 1, after 4 calls
    with pytest.raises(SystemExit) as exc:
        main(["model=scripted", "rounds=4", "--pilot", str(cut)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: --pilot {cut}: no round played (0 of 4, interrupted)")


def test_a_run_in_a_pilot_folder_that_played_no_round_is_skipped_naming_it(
    run: Callable[..., RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    """A pilot sweep with one cell stopped inside round 1 refused the whole plan; the
    usable run now calibrates it, and a line names the run skipped. With no usable
    run left, the folder is refused as the run alone is."""
    cut = run(*BUDGET, "budget.usd=0.002").run_dir  # stops inside round 1
    with pytest.raises(SystemExit):
        main(["model=scripted", "rounds=4", "--pilot", str(cut.parent)])
    assert capsys.readouterr().err.startswith(f"error: --pilot {cut}: no round played (0 of 4, interrupted)")
    run("rounds=2", "run_name=whole")
    assert main(["model=scripted", "rounds=4", "--pilot", str(cut.parent)]) == 0
    out = capsys.readouterr().out
    assert "calibrated from 1 pilot run(s)" in out
    assert f"pilot: skipped {cut}: no round played (0 of 4, interrupted), so no turn to calibrate from" in out


def test_a_fork_as_pilot_counts_only_its_own_rounds(
    run: Callable[..., RunResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fork's rounds 1..k are its parent's (its replies leave them out): no turns of its own."""
    parent = run("rounds=4", "run_name=parent").run_dir
    given = [f"fork.parent={parent}", "fork.at_round=2", f"runs_root={tmp_path}"]
    fork = fork_run(compose_cfg([*given, "progress=false"]), given).run_dir
    assert main(["model=scripted", "rounds=4", "--pilot", str(fork)]) == 0
    out = capsys.readouterr().out
    assert "pilot: 4 turns in 1 run(s), 3.0 calls a turn where the dry passes make 3.0" in out
    assert f"pilot: {fork}: a fork at round 2, only its rounds 3-4 count" in out


@pytest.mark.parametrize("where", ["nowhere", "empty"])
def test_a_bad_pilot_path_is_one_line_naming_it(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / where
    if where == "empty":
        folder.mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["model=scripted", "rounds=1", "--pilot", str(folder)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(f"error: --pilot {folder}:") and err.count("\n") == 1


@pytest.mark.parametrize(("made", "says"), [(False, "no such folder"), (True, "not a folder")])
def test_a_pilot_that_is_no_folder_is_one_line_saying_which(
    made: bool, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a file (the run's manifest.json, say) was 'no such folder', of a path that is there
    path = tmp_path / "manifest.json"
    if made:
        path.write_text("{}")
    with pytest.raises(SystemExit):
        main(["model=scripted", "rounds=2", "--pilot", str(path)])
    assert capsys.readouterr().err == f"error: --pilot {path}: {says}\n"


def test_a_pilot_of_another_format_is_one_line(
    pilot: Callable[..., list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    # among several pilot folders, the line names the one of another format ('--pilot: runs of drift')
    judged, drift = pilot("format=judge_refine", seeds=(1,)), pilot(seeds=(2,))
    with pytest.raises(SystemExit):
        main(["model=scripted", "format=judge_refine", "rounds=2", *judged, *drift])
    err = capsys.readouterr().err
    assert err.startswith(f"error: --pilot {drift[1]}: a run of drift, cell ")
    assert "a pilot must run the planned format" in err and err.count("\n") == 1


def test_a_scripted_pilot_with_no_latency_leaves_the_seconds_a_call_to_the_plans_model(
    pilot: Callable[..., list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """A scripted pilot's calls take ~0 s (the harness's own, counted apart): the wall line
    said "a call 0 s as the pilot's replies took"; the plan's model times them, and a line
    says why. A scripted pilot given model.latency_s took real seconds: those stay."""
    assert main(["model=openai", "rounds=4", *pilot(seeds=(1,))]) == 0
    out = capsys.readouterr().out
    wall = next(line for line in out.splitlines() if line.startswith("wall:"))
    assert "a call 2 s at the provider (--call-s)" in wall and "the pilot's" not in wall
    assert "pilot: cons, critic, pros ran the scripted model with model.latency_s=0, whose seconds" in out
    assert main(["model=openai", "rounds=4", *pilot("model.latency_s=0.02", seeds=(2,))]) == 0
    out = capsys.readouterr().out
    assert "as the pilot's replies took" in out and "model.latency_s=0, whose" not in out


def test_a_recorded_plan_gives_the_live_page_its_time_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["-m", "model=scripted", "model.latency_s=1", "rounds=2", "llm.temperature=0.2,1.0"]
    assert main([*argv, "--record", str(tmp_path)]) == 0
    assert "recorded:" in capsys.readouterr().out
    cells = json.loads((tmp_path / PLAN_JSON).read_text())["cells"]
    assert set(cells) == {"temp-0.2", "temp-1.0"} and min(cells.values()) > 0
    rows = [
        {"name": "temp-0.2", "status": "running", "rounds": 2, "rounds_done": 1},
        {"name": "temp-1.0", "status": "pending", "rounds": 2},
    ]
    left = time_left(tmp_path, rows)
    assert left is not None and left.endswith("(plan)")
    finished = [{**row, "status": "completed", "wall_s": 10.0} for row in rows]
    assert time_left(tmp_path / "no-plan", [finished[0], rows[1]]) == "time left ≈ 0m10s (rate so far)"
    assert time_left(tmp_path, finished) is None


def fork_rows(capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("forks: each counts only its rounds after k")
    return {line.split()[0]: line.split() for line in lines[2:] if "-fork" in line or "round-" in line}


def test_a_fork_is_planned_from_its_parent_and_pays_only_its_rounds(
    run: Callable[..., RunResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The parent's config (6 rounds, not the default's 3), the fork's override on it,
    rounds 3-6 only: as the fork then bills them."""
    parent = run("rounds=6", "memory.window_rounds=1", "run_name=parent").run_dir
    given = [f"fork.parent={parent}", "fork.at_round=2", f"runs_root={tmp_path}", "llm.max_tokens=200"]
    plan, runs = build_plan(parse(given))
    print("\n".join(render(plan, None, runs, 0.0)))
    assert fork_rows(capsys)["parent-fork2"][1:3] == ["3-6", "rounds"]
    cell = plan.rows[0].estimate.cell
    assert (cell.at_round, cell.settings.rounds, cell.settings.llm.max_tokens) == (2, 6, 200)
    assert plan.pilot is None  # a scripted parent is no pilot
    fork = fork_run(compose_cfg([*given, "progress=false"]), given).run_dir
    close_to(plan, fork)
    assert 0 < ledger(fork).calls < ledger(parent).calls


def test_a_fork_grid_plans_each_fork_from_its_round(
    run: Callable[..., RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    parent = run("rounds=6", "memory.window_rounds=1", "run_name=parent").run_dir
    assert main(["-m", f"fork.parent={parent}", "fork.at_round=2,4"]) == 0
    rows = fork_rows(capsys)
    early, late = rows["at-round-2"], rows["at-round-4"]
    assert (early[1], late[1]) == ("3-6", "5-6")
    assert int(early[3]) == 2 * int(late[3]) > 0  # window 1: every round after the first costs the same


def test_interviews_on_a_long_run_are_counted_per_chosen_round(settings: Callable[..., Config]) -> None:
    """The dry passes of a 40-round run are a few rounds long: rounds 20 and 40's
    interviews cost what two interviews cost on a run short enough to run whole."""

    def calls(*overrides: str) -> float:
        return build_plan(parse(["model=scripted", "memory.window_rounds=1", *overrides]))[0].point().calls

    long = calls("rounds=40", "interviews.rounds=[20,40]") - calls("rounds=40")
    short = calls("rounds=3", "interviews.rounds=[2,3]") - calls("rounds=3")
    cfg = settings("interviews.rounds=[2]")
    seats = len(get_format(cfg.format.name).layout(cfg).seats)
    assert long == short == 2 * seats * len(questionnaire(cfg.interviews)) > 0


def test_a_real_model_parent_is_its_forks_pilot(run: Callable[..., RunResult]) -> None:
    parent = run("rounds=2", "run_name=parent").run_dir
    config = parent / "config.yaml"  # as if it had run on an API model: its replies are a pilot
    config.write_text(config.read_text().replace("scripted:default", "openai:gpt-4o-mini"))
    plan, _ = build_plan(parse([f"fork.parent={parent}", "fork.at_round=1"]))
    assert plan.pilot is not None and [r.path for r in plan.pilot.runs] == [parent]
    assert plan.rows[0].estimate.call_s  # each role's seconds a call, from the parent's replies


def test_fork_plan_is_the_plan_of_the_forks_overrides(
    run: Callable[..., RunResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``harness.fork --plan`` hands harness.plan the overrides it would hand harness.run."""
    parent = run("rounds=1", "run_name=parent").run_dir
    called: list[list[str]] = []
    monkeypatch.setattr(
        fork_cli.subprocess, "run", lambda argv: called.append(argv) or CompletedProcess(argv, 0)
    )
    with pytest.raises(SystemExit) as done:
        fork_cli.main([str(parent), "--at-round", "1", "--plan", "--pilot", str(parent), "critic=strict"])
    assert done.value.code == 0
    assert called[0][1:] == [
        "-m", "harness.plan", f"--pilot={parent}", f"fork.parent={parent}", "fork.at_round=1", "critic=strict"
    ]  # fmt: skip


def test_a_budget_the_cells_would_meet_is_said_under_the_table(
    run: Callable[..., RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    """A run stops at its budget: the plan of one whose point crosses it says the cells
    stop there (the run does), one between the point and the high that they may, and a
    budget above the high says nothing; the sweep's is set against the total."""
    assert main(["model=scripted", *BUDGET[:2], "budget.usd=0.005"]) == 0
    out = capsys.readouterr().out
    assert "budget: budget.usd=$0.0050 is below the point of 1 of 1 cell(s) (up to $0." in out
    assert "they stop at it, interrupted (exit 75)" in out
    assert run(*BUDGET, "budget.usd=0.005").manifest.status == "interrupted"
    plan, _ = build_plan(parse(["-m", "model=scripted", *BUDGET[:2], "seed=1,2", "sweep.concurrency=2"]))
    budget = plan.rows[0].estimate.cell.settings.budget
    budget.tokens = 20000  # the first cell's only; its point is ~4,000 tokens, its high ~100,000
    assert budget_lines(plan)[0].startswith(
        "budget: budget.tokens=20,000 is below the high of 1 of 1 cell(s)"
    )
    budget.tokens, budget.sweep_usd = 10**6, 0.005
    assert budget_lines(plan) == [
        f"budget: budget.sweep_usd=$0.0050 is below the point of the sweep's cells together (up to "
        f"{format_usd(plan.dollars().point)}): they stop at it, interrupted (exit 75), short of the figures "
        "above; raise it to resume (docs/costs.md)"
    ]
    budget.sweep_usd = 5
    assert budget_lines(plan) == []


def test_a_dollar_budget_on_a_model_with_no_price_is_refused_as_the_run_refuses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["model=openai", "model.spec=openai:no-such-model", "budget.usd=1", "rounds=1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: budget.usd: 'openai:no-such-model' (role ") and "has no price" in err


def test_a_ctrl_c_during_a_dry_pass_plans_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry pass is a run, and a run stops cleanly on Ctrl-C: the pass ended part-way and
    the plan printed its part as the cell's (judge_refine 95 calls where it makes 90), exit 0."""
    real = dry.run_debate

    def stopped(*args: object, **kwargs: object) -> RunResult:
        request_stop("SIGINT")  # as the run's own handler records a Ctrl-C
        try:
            return real(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            clear_stop()

    monkeypatch.setattr(dry, "run_debate", stopped)
    with pytest.raises(SystemExit) as exc:
        main(["model=scripted", "rounds=2"])
    out, err = capsys.readouterr()
    assert exc.value.code == 130 and err == "error: interrupted; nothing planned\n" and "cell" not in out


@pytest.mark.parametrize(
    "model",
    [["model=gemma3_270m"], ["model=smollm2", "model.repeat_penalty=1.15"]],
    ids=["document", "penalty"],
)
def test_a_local_only_key_is_planned(model: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # model=gemma3_270m (prompt_style=completion) was 'error: model.prompt_style: completion is
    # for local:* models only, got spec 'scripted:default'', and model.repeat_penalty the same:
    # its dry passes' stand-in was refused
    assert main([*model, "rounds=1"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("memory-"))
    assert row.split()[1:4] == ["1", "rounds", "6"]  # a persona, a draft and a critique a team
