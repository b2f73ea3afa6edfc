"""Forks (``harness.engine.forking``; docs/forks.md): a new run from a
parent's snapshot at round k. With no override it continues exactly as its
parent did, on every format; its ledger holds only its own calls; bad input
is one line and makes nothing; the parent is never written to."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from conftest import CONF_DIR, compose_cfg
from fixtures.make_formats_golden import CASES, stable
from omegaconf import OmegaConf

from harness.cli.errors import parent_keys_forced
from harness.config import resolve
from harness.engine import RunResult, run_debate
from harness.engine.forking import fork_run
from harness.formats.checks import verify
from harness.schema import ConfigError
from harness.store.reader import replies
from harness.store.rundir import RunLock, read_manifest

FORMATS = {name: [o for o in overrides if not o.startswith("rounds=")] for name, overrides in CASES}


def start(root: Path, name: str, *overrides: str) -> Path:
    cfg = compose_cfg(
        ["model=scripted", f"runs_root={root}", "progress=false", f"run_name={name}", *overrides]
    )
    return run_debate(resolve(cfg), OmegaConf.to_container(cfg, resolve=True)).run_dir  # type: ignore[arg-type]


def fork(parent: Path, k: int, *overrides: str, root: Path | None = None) -> RunResult:
    """``python -m harness.run fork.parent=<parent> fork.at_round=k <overrides>``, in-process."""
    given = [f"fork.parent={parent}", f"fork.at_round={k}", f"runs_root={root or parent.parent}", *overrides]
    return fork_run(compose_cfg([*given, "progress=false"]), given)


@pytest.fixture(scope="module")
def parents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One 3-round scripted run per format (faults and all), shared by this module's tests."""
    root = tmp_path_factory.mktemp("parents")
    cache = tmp_path_factory.mktemp("search-cache")
    out = {}
    for name, overrides in FORMATS.items():
        extra = [f"search.cache_dir={cache}"] if name == "grounded" else []
        out[name] = start(root, name, "rounds=3", *overrides, *extra)
    return out


def logs(run_dir: Path) -> dict[str, list[dict]]:
    """Every log's records, without what varies between identical runs (time)."""
    return {
        str(p.relative_to(run_dir)): [stable(json.loads(line)) for line in p.read_text().splitlines()]
        for p in sorted(run_dir.rglob("*.jsonl"))
    }


def tamper(run_dir: Path) -> None:
    """Change the first published turn's text, as an edit by hand would."""
    path = run_dir / "shared_memory.jsonl"
    first, *rest = path.read_text().splitlines(keepends=True)
    record = json.loads(first)
    record["text"] = "edited " + record["text"]
    path.write_text(json.dumps(record) + "\n" + "".join(rest))


def files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_a_new_seed_changes_only_the_rounds_after_the_fork(parents, tmp_path):
    forked = fork(parents["drift"], 1, "seed=99", root=tmp_path)
    assert forked.manifest.lineage and forked.manifest.lineage.changed == {"seed": 99}
    mine, theirs = logs(forked.run_dir)["shared_memory.jsonl"], logs(parents["drift"])["shared_memory.jsonl"]
    assert [r for r in mine if r["round"] <= 1] == [r for r in theirs if r["round"] <= 1]
    assert [r["text"] for r in mine if r["round"] > 1] != [r["text"] for r in theirs if r["round"] > 1]


def test_overrides_apply_to_the_parents_config_not_the_defaults(tmp_path):
    parent = start(tmp_path, "p", "rounds=2", "llm.temperature=0.3", "memory.window_rounds=3")
    forked = fork(parent, 1, "critic=strict", "rounds=3")
    kept = yaml.safe_load((forked.run_dir / "config.yaml").read_text())
    assert kept["llm"]["temperature"] == 0.3 and kept["memory"]["window_rounds"] == 3  # the parent's
    assert kept["critic"] == yaml.safe_load((CONF_DIR / "critic" / "strict.yaml").read_text())
    assert kept["rounds"] == 3 and forked.manifest.counts.rounds_completed == 3
    assert forked.manifest.lineage and forked.manifest.lineage.changed["critic.name"] == "strict"
    assert forked.run_dir.name == "p-fork1"
    again = fork(forked.run_dir, 2)  # a fork of a fork: its prefix counts both rounds, of two runs
    assert again.manifest.lineage is not None
    whole = forked.manifest.counts + forked.manifest.lineage.prefix_counts
    assert (
        again.manifest.lineage.prefix_counts.model_calls + again.manifest.counts.model_calls
        == whole.model_calls
    )
    assert logs(again.run_dir) == logs(forked.run_dir)


def test_a_key_of_the_parents_format_is_forked_as_typed(tmp_path):
    """A panel parent's roles.judge.temperature=0.2 was refused ('Key judge is not in struct',
    use +roles.judge...): Hydra composed it over the default format, which has no judge."""
    from harness.fork import fork as front_door

    parent = start(tmp_path, "panel", "format=panel", "rounds=2")
    forked = front_door(parent, 1, [f"runs_root={tmp_path}", "progress=false", "roles.judge.temperature=0.2"])
    assert (
        yaml.safe_load((forked.run_dir / "config.yaml").read_text())["roles"]["judge"]["temperature"] == 0.2
    )
    assert forked.manifest.lineage and forked.manifest.lineage.changed == {"roles.judge.temperature": 0.2}
    # harness.run's command line and harness.fork's both go through it
    typed = [f"fork.parent={parent}", "fork.at_round=1", "roles.judge.temperature=0.2", "roles.nobody.x=1"]
    assert parent_keys_forced(typed)[2:] == ["++roles.judge.temperature=0.2", "roles.nobody.x=1"]


BAD = {
    "a round past the last snapshot": ((5,), "fork.at_round: 5 is past"),
    "the format": ((1, "format=panel"), "format=panel: a fork keeps its parent's format"),
    "the seats": ((1, "format.teams=[a,b]"), "format.teams: cannot change mid-run"),
    "the motion": ((1, "topic.text=other"), "topic.text: cannot change mid-run"),
    "fewer rounds than it copies": ((2, "rounds=1"), "rounds=1: a fork at round 2 has 2 rounds already"),
    # was 'interviews.rounds: set, with no questionnaire item to ask' (and the probes' like it)
    "interviews its parent never had": (
        (1, "interviews.rounds=[2]"),
        r"^interviews.rounds: .*drift ran without checkpoint interviews, and a fork keeps its parent's",
    ),
    "probes its parent never asked": (
        (1, "probes.enabled=true"),
        r"^probes.enabled: .* without behavioural probes",
    ),
    # was run: the schema's default critic ran, while its lineage said every critic.* key was None
    "a deletion": ((1, "~critic"), r"^~critic: a fork sets keys and deletes none"),
    "a key's deletion": ((1, "~critic.copy_threshold"), r"^~critic.copy_threshold: a fork sets keys"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_makes_nothing(parents, tmp_path, case):
    args, message = BAD[case]
    with pytest.raises(ConfigError, match=message) as err:
        fork(parents["drift"], *args, root=tmp_path / "forks")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "forks").exists()


@pytest.mark.parametrize("case", list(BAD))
def test_the_plan_of_a_refused_fork_is_the_forks_one_line(parents, tmp_path, case):
    """``harness.fork ... --plan`` (harness.plan of a fork) planned a fork that fewer rounds
    than k, or interviews or probes its parent never had, refuse (or said another line)."""
    from harness.plan.cells import PlanError, compose_cells

    (k, *overrides), _ = BAD[case]
    with pytest.raises(ConfigError) as refused:
        fork(parents["drift"], k, *overrides, root=tmp_path / "forks")
    given = [f"fork.parent={parents['drift']}", f"fork.at_round={k}", f"runs_root={tmp_path / 'forks'}"]
    with pytest.raises(PlanError) as planned:
        compose_cells([*given, *overrides])
    assert str(planned.value) == str(refused.value)


@pytest.mark.parametrize(("at_round", "bad"), [("abc", "abc"), ("1,x", "x")])
def test_an_at_round_that_is_no_number_is_one_line(tmp_path, capsys, at_round, bad):
    from harness.fork import main

    with pytest.raises(SystemExit) as done:
        main([str(tmp_path), "-m", "--at-round", at_round])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"error: --at-round {at_round}: '{bad}' is not a round number")


def one_line_exit(main, argv: list[str], capsys, monkeypatch) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """(exit code, stderr) of a front door run in-process; harness.run reads ``sys.argv``."""
    monkeypatch.setattr(sys, "argv", ["harness", *argv])
    with pytest.raises(SystemExit) as done:
        main(argv) if main.__module__ == "harness.fork" else main()
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return int(done.value.code or 0), err


def test_a_fork_with_resume_given_too_is_one_line_not_a_silent_resume(parents, tmp_path, capsys, monkeypatch):
    """``harness.run resume=<run> fork.parent=<p> fork.at_round=1`` (or ``harness.fork <p>
    --at-round 1 resume=<run>``) resumed <run> and dropped the fork unsaid; now one line."""
    from harness.fork import main as fork_main
    from harness.run import cli as run_cli

    parent = parents["drift"]
    resumed = shutil.copytree(parent, tmp_path / "other-run")  # a run a resume would take
    line = (
        f"error: fork.parent: resume={resumed} continues that run, and a fork makes a new one; give one: "
        "python -m harness.fork <parent> --at-round K, or harness.resume <run>\n"
    )
    argv = [f"resume={resumed}", f"fork.parent={parent}", "fork.at_round=1", f"runs_root={tmp_path / 'f'}"]
    assert one_line_exit(run_cli, argv, capsys, monkeypatch) == (2, line)
    forked = [str(parent), "--at-round", "1", f"resume={resumed}", f"runs_root={tmp_path / 'f'}"]
    assert one_line_exit(fork_main, forked, capsys, monkeypatch) == (2, line)
    assert not (tmp_path / "f").exists()
    assert (resumed / "manifest.json").read_bytes() == (parent / "manifest.json").read_bytes()


def test_a_bad_parent_typed_to_harness_run_is_harness_forks_one_line(parents, tmp_path, capsys, monkeypatch):
    """``python -m harness.run fork.parent=<bad>`` typed directly: the line harness.fork
    gives (was pydantic's 'fork.parent: 1 validation error for dict[str,any]', a config.yaml
    named without its key, and a traceback, exit 1, with fork.at_round left out or no number).
    An empty or blank parent is one line too, in both (was the current folder, forked)."""
    from harness.fork import main as fork_main
    from harness.run import cli as run_cli

    bad_json = tmp_path / "bad-json"
    bad_json.mkdir()
    (bad_json / "manifest.json").write_text('{"run_id": ')
    bad_yaml = shutil.copytree(parents["drift"], tmp_path / "bad-yaml")
    (bad_yaml / "config.yaml").write_text(": [")
    root = f"runs_root={tmp_path / 'forks'}"
    for parent, file in [(bad_json, "manifest.json"), (bad_yaml, "config.yaml")]:
        code, err = one_line_exit(fork_main, [str(parent), "--at-round", "1", root], capsys, monkeypatch)
        assert (code, err.startswith(f"error: fork.parent: {parent / file}: unreadable: ")) == (2, True), err
        assert one_line_exit(
            run_cli, [f"fork.parent={parent}", "fork.at_round=1", root], capsys, monkeypatch
        ) == (
            code,
            err,
        )
    for at_round, message in [
        ([], "fork.at_round: a fork needs both fork.parent and fork.at_round"),
        (["fork.at_round=abc"], "fork.at_round: 'abc' is not a round number (k: a whole number >= 1)"),
    ]:
        argv = [f"fork.parent={parents['drift']}", *at_round, root]
        assert one_line_exit(run_cli, argv, capsys, monkeypatch) == (2, f"error: {message}\n")
    monkeypatch.chdir(parents["drift"])  # an empty parent was the current folder: this run, forked unasked
    for blank in ("", "  "):
        line = (2, f"error: fork.parent: {blank!r} is blank; name the parent's run folder\n")
        assert one_line_exit(fork_main, [blank, "--at-round", "1", root], capsys, monkeypatch) == line
    assert one_line_exit(run_cli, ["fork.parent=", "fork.at_round=1", root], capsys, monkeypatch) == (
        2,
        "error: fork.parent: '' is blank; name the parent's run folder\n",
    )
    assert not (tmp_path / "forks").exists()


def test_a_fork_at_the_round_its_parents_format_closed_is_refused_when_it_changes_anything(parents, tmp_path):
    """judge_refine closes after its last round (a final evaluation): a fork there with
    rounds=5 ended 'completed 3/5' having run nothing, and seed=5 changed nothing, as
    a resume extending a closed run is refused. A fork that changes nothing copies it."""
    parent = parents["judge_refine"]
    for change in ("rounds=5", "seed=5"):
        with pytest.raises(ConfigError) as err:
            fork(parent, 3, change, root=tmp_path / "forks")
        key = change.partition("=")[0]
        assert str(err.value) == (
            f"fork.at_round: 3: {parent} was closed by its format after round 3 (final evaluation "
            f"after round 3); a fork there has no round left to change ({key}); fork at round 2 or before"
        )
    assert not (tmp_path / "forks").exists()
    assert fork(parent, 3, root=tmp_path).manifest.status == "completed"
    assert fork(parent, 2, "rounds=4", root=tmp_path).manifest.counts.rounds_completed == 4


def test_a_fork_of_a_fork_before_its_fork_round_is_refused_naming_its_parent(parents, tmp_path):
    """F1's rounds 1-2 are its parent's, made under the parent's config: a fork of F1
    at round 1 would go on under F1's (seed 7) and call that "nothing changed"."""
    f1 = fork(parents["drift"], 2, "seed=7", "run_name=f1", root=tmp_path).run_dir
    with pytest.raises(ConfigError) as err:
        fork(f1, 1, root=tmp_path / "forks")
    assert str(err.value) == (
        f"fork.at_round: {f1}'s rounds 1-2 are {parents['drift'].resolve()}'s (a fork at round 2); "
        f"fork that run instead: python -m harness.fork {parents['drift'].resolve()} --at-round 1"
    )
    with pytest.raises(ConfigError) as err:  # it said: fork that run instead (...) --at-round 0
        fork(f1, 0, root=tmp_path / "forks")
    assert str(err.value) == "fork.at_round: must be >= 1 (a fork starts after a round of its parent), got 0"
    assert not (tmp_path / "forks").exists()


def test_a_running_or_broken_parent_is_refused(parents, tmp_path):
    with RunLock(parents["drift"]), pytest.raises(ConfigError, match="is running now"):
        fork(parents["drift"], 1, root=tmp_path)
    broken = shutil.copytree(parents["drift"], tmp_path / "broken")
    tamper(broken)
    with pytest.raises(ConfigError, match=r"broken fails verify \(\d+ violation"):
        fork(broken, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]


def test_a_forks_export_says_whose_rounds_it_holds(parents, tmp_path):
    """A fork's report read as a whole run of its own: no word of its parent, its fork
    round or what it changed, in md, txt or json (the viewer and manifest had them)."""
    from harness.export.styles import export_run

    forked = fork(parents["drift"], 1, "seed=7", root=tmp_path).run_dir
    line = (
        f"of drift ({parents['drift'].resolve()}) at round 1: round 1 is its parent's, "
        "not paid again; changed: seed=7"
    )
    assert f"- **Fork:** {line}" in export_run(forked, "md").splitlines()
    assert "Fork:      of drift (" in export_run(forked, "txt")
    header = json.loads(export_run(forked, "json"))["header"]
    assert header["fork"] == {
        "parent": str(parents["drift"].resolve()),
        "parent_run_id": "drift",
        "at_round": 1,
        "changed": {"seed": 7},
    }
    assert json.loads(export_run(parents["drift"], "json"))["header"]["fork"] is None


def test_verify_checks_the_prefix_against_the_parent_while_it_is_there(tmp_path):
    parent = start(tmp_path, "p", "rounds=2")
    forked = fork(parent, 1).run_dir
    tamper(parent)
    problems, _ = verify(forked)
    assert any("no longer holds the prefix" in p for p in problems)
    shutil.rmtree(parent)
    assert verify(forked)[0] == [] and "is not there" in verify(forked)[1][0]


def test_the_viewer_shows_a_runs_family(tmp_path):
    from harness.view import Catalog, route

    parent = start(tmp_path, "p", "rounds=2")
    fork(parent, 1, "critic=strict")
    catalog = Catalog(tmp_path)
    mine = route(catalog, "/run/p-fork1")[1]
    assert 'fork of <a href="/run/p">p</a>' in mine and "at round 1" in mine and "critic.name=strict" in mine
    assert 'branches: <a href="/run/p-fork1">p-fork1</a> (at round 1)' in route(catalog, "/run/p")[1]


def test_a_fork_killed_once_made_resumes_like_any_run(parents, tmp_path, monkeypatch):
    from harness.engine import forking, resume_run

    def killed(*args: object) -> RunResult:
        raise KeyboardInterrupt

    monkeypatch.setattr(forking, "start_fork", killed)
    with pytest.raises(KeyboardInterrupt):
        fork(parents["drift"], 2, root=tmp_path)
    (made,) = tmp_path.iterdir()  # whole, with its manifest: no half-made folder
    assert read_manifest(made).lineage is not None
    resumed = resume_run(made)
    assert resumed.manifest.status == "completed" and resumed.manifest.counts.rounds_completed == 3
    mine, theirs = logs(made), logs(parents["drift"])
    assert {k: v for k, v in mine.items() if k != "events.jsonl"} == {
        k: v for k, v in theirs.items() if k != "events.jsonl"
    }


def test_a_resume_that_changes_where_a_fork_forks_is_one_line_and_touches_nothing(parents, tmp_path, capsys):
    """``harness.resume <fork> fork.at_round=1`` was accepted unsaid: the fork went on
    from round 2, as it was made. A change of ``fork.*`` on resume is now one line, exit 2."""
    from harness.resume import main as resume_main

    made = fork(parents["drift"], 2, "rounds=4", root=tmp_path).run_dir
    before = files(made)
    for given in ("fork.at_round=1", f"fork.parent={parents['panel']}", "~fork"):
        assert resume_main([str(made), given, "rounds=5"]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"error: {given}: a resume continues {made} as it was made; a fork at another round "
            f"is a new run: python -m harness.fork {parents['drift']} --at-round K\n"
        )
    assert files(made) == before
    parent = parents["drift"]  # a run that is no fork: the fork to make is of it
    assert resume_main([str(parent), "fork.at_round=1"]) == 2
    assert capsys.readouterr().err == (
        f"error: fork.at_round=1: a resume continues {parent} as it was made; a fork of it "
        f"is a new run: python -m harness.fork {parent} --at-round K\n"
    )


def test_a_fork_at_round_1_says_round_1_copied(parents, tmp_path, capsys):
    """Its summary said 'rounds 1-1 copied' (harness.export says 'round 1 is its parent's')."""
    from harness.cli.report import report

    report(fork(parents["drift"], 1, root=tmp_path))
    assert (
        f"fork of {parents['drift']} at round 1: round 1 copied, not paid again (" in capsys.readouterr().err
    )


@pytest.mark.parametrize("name", list(FORMATS))
def test_forks_with_no_override_continue_exactly_as_their_parent_on_every_format(
    parents, tmp_path, monkeypatch, name
):
    """A fork grid, ``python -m harness.run -m fork.parent=<run> fork.at_round=1,2``, in-process:
    each fork writes its parent's records, pays only its own calls, and verifies clean."""
    from harness.run import cli
    from harness.sweep.index import read_index

    parent, sweep_dir = parents[name], tmp_path / "sweep"
    before = files(parent)
    argv = ["-m", f"fork.parent={parent}", "fork.at_round=1,2", f"hydra.sweep.dir={sweep_dir}"]
    monkeypatch.setattr(sys, "argv", ["harness.run", *argv, "progress=false"])
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # put back what the command guards
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    cli()
    assert files(parent) == before  # the parent is only read
    index = read_index(sweep_dir)
    assert [(c.name, c.status) for c in index.cells] == [(f"at-round-{k}", "completed") for k in (1, 2)]
    for k, cell in enumerate(index.cells, 1):
        forked = sweep_dir / cell.name
        assert logs(forked) == logs(parent)
        manifest, whole = read_manifest(forked), read_manifest(parent).counts
        lineage = manifest.lineage
        assert lineage is not None and (lineage.at_round, lineage.changed) == (k, {})
        assert lineage.parent == str(parent.resolve()) and lineage.parent_run_id == parent.name
        # its own calls only: the prefix's are the parent's, in the lineage
        assert manifest.counts.model_calls + lineage.prefix_counts.model_calls == whole.model_calls
        own = list(replies(forked))
        assert all(r.round > k for r in own) and len(own) == sum(r.round > k for r in replies(parent))
        assert verify(forked) == ([], [])


def test_a_fork_grids_rows_show_the_rounds_and_seeds_its_forks_run(tmp_path, monkeypatch):
    """A fork cell's rows, running and skipped by a resume, said the default config's 3
    rounds of a parent's 4 ('2/3' while running, '4/3' once skipped) and seed 0; and
    replicates=2 ran replicate 0 at the default's seed 0 (its lineage: 'changed seed=0')
    and replicate 1 at one derived from 0, not from the parent's seed 3, so forks of two
    parents shared their continuations' seeds."""
    from harness.config import replicate_seed
    from harness.run import cli
    from harness.sweep.index import RESUME_ENV, read_index, relaunch_command

    parent, sweep_dir = start(tmp_path, "p", "rounds=4", "seed=3"), tmp_path / "sweep"
    argv = ["-m", f"fork.parent={parent}", "fork.at_round=2", "replicates=2", f"hydra.sweep.dir={sweep_dir}"]
    monkeypatch.setattr(sys, "argv", ["harness.run", *argv, "progress=false"])
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # put back what the command guards
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    cli()
    # python -m harness.sweep resume's relaunch, in-process: the completed cells are skipped
    monkeypatch.setenv(RESUME_ENV, "1")
    monkeypatch.setattr(sys, "argv", ["harness.run", *relaunch_command(sweep_dir, read_index(sweep_dir))[3:]])
    cli()
    seeds = {"rep-0": 3, "rep-1": replicate_seed(3, 1)}
    records = [json.loads(line) for line in (sweep_dir / "cells.jsonl").read_text().splitlines()]
    assert [(r["cell"], r["status"], r["action"], r["rounds"], r["seed"]) for r in records] == [
        (cell, status, action, 4, seeds[cell])
        for status, action, cells in (("running", "run", ["rep-0"]), ("completed", "run", ["rep-0"]))
        + (("running", "run", ["rep-1"]), ("completed", "run", ["rep-1"]))
        + (("completed", "skip", ["rep-0", "rep-1"]),)
        for cell in cells
    ]
    assert [(c.rounds_done, c.rounds, c.seed) for c in read_index(sweep_dir).cells] == [
        (4, 4, seeds["rep-0"]),
        (4, 4, seeds["rep-1"]),
    ]
    changed = [read_manifest(sweep_dir / cell).lineage.changed for cell in seeds]  # type: ignore[union-attr]
    assert "seed" not in changed[0] and changed[1]["seed"] == seeds["rep-1"]
