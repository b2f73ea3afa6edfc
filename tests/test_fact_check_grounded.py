"""Grounded fact-checks in the moderated format (``format.fact_check=grounded``)
on the scripted model over a four-passage fixture collection: Con's words
meet a passage that denies them (struck, then disqualified, every strike
citing it), Pro's words find nothing (never struck); forged citations never
strike nor count as support, nor are listed as the check's passages; config
errors; verify's
checks, each with a positive control;
kill and resume inside a check, the search server killed too; SmolLM2 on
the KJV (slow)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from test_durable_faults import Outcome, run_in_process

from harness.engine import resume_run
from harness.formats.checks import verify
from harness.models import ModelRequest, build_model
from harness.models.base import Completion
from harness.schema import ConfigError
from harness.store.memory import JsonlLog
from harness.store.records import EventRecord, FactCheckRecord, SearchRecord

# The scripted checker rules "contradicted" on a passage holding a denial word
# (harness.models.scripted_rules.DENIALS): "denial" holds two and Con's register
# words; Pro's register words are in no passage at all.
PASSAGES = [
    ("denial", "It is false that risk, cost and harm follow; loss, failure and danger are wrong."),
    ("streets", "The city centre has old streets, small shops and quiet squares."),
    ("trams", "Buses and trams carry most travellers between the stations."),
    ("parks", "Parks and gardens line the river on its northern bank."),
]


def write_collection(folder: Path, passages: list[tuple[str, str]]) -> Path:
    folder.mkdir(exist_ok=True)
    rows = [json.dumps({"id": pid, "text": text}) for pid, text in passages]
    (folder / "facts.jsonl").write_text("\n".join(rows) + "\n")
    return folder


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_collection(tmp_path_factory.mktemp("facts"), PASSAGES)


def checking(collection: Path, search_cache: Path) -> tuple[str, ...]:
    """A moderated debate's overrides for grounded checks over ``collection``, searched in-process."""
    return (
        "format=moderated",
        "format.fact_check=grounded",
        f"search.collection={collection}",
        "search.transport=local",
        f"search.cache_dir={search_cache}",
    )


@pytest.fixture
def grounded_check(collection: Path, search_cache: Path) -> tuple[str, ...]:
    return checking(collection, search_cache)


@pytest.fixture(scope="module")
def struck(tmp_path_factory: pytest.TempPathFactory, collection: Path, search_cache: Path) -> Path:
    """One finished grounded-check run (Con struck out), copied by each test that edits it."""
    args = ("model=scripted", "progress=false", *checking(collection, search_cache))
    return run_in_process(args, tmp_path_factory.mktemp("struck"))


def checks_of(run_dir: Path, records) -> list[FactCheckRecord]:  # type: ignore[no-untyped-def]
    return records(run_dir / "public" / "factchecks.jsonl")


def test_a_side_a_passage_contradicts_is_struck_and_disqualified_each_strike_citing_it(struck, records):
    run_dir = struck
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stop_reason"] == "disqualified: con after 3 strikes; winner pro"
    strikes = [e for e in records(run_dir / "events.jsonl") if e.event == "strike"]
    assert [e.team for e in strikes] == ["con"] * 3
    checks = {c.id: c for c in checks_of(run_dir, records)}
    searches = {s.id: s for s in records(run_dir / "public" / "searches.jsonl")}
    for event in strikes:
        check = checks[event.data["fact_check_id"]]
        assert check.grounded and check.verdict == "fail" and not check.fallback
        contra = [r for r in check.rulings if r.ruling == "contradicted"]
        assert contra and all(r.citation.id == "denial" and r.citation.status == "supported" for r in contra)
        assert all("denial" in [h.id for h in searches[r.search_id].hits] for r in contra)
        assert check.passages == ["denial"] and check.evidence == [f"[denial] (facts.jsonl) {PASSAGES[0][1]}"]
        assert check.hits == sum(len(searches[s].hits) for s in check.searches) > 0
    # a claim no passage speaks to is not found, and never a strike
    pro = [c for c in checks.values() if c.team == "pro"]
    assert pro and all(c.verdict == "pass" and not c.fallback for c in pro)
    assert {r.ruling for c in pro for r in c.rulings} == {"not_found"}
    # the retry prompt quotes the passage that contradicted the draft
    retries = [p for p in records(run_dir / "con" / "prompts.jsonl") if p.iteration > 0]
    assert retries and all(
        f"The passages that contradict it:\n[denial] (facts.jsonl) {PASSAGES[0][1]}"
        in p.messages[-1]["content"]
        for p in retries
    )
    assert verify(run_dir) == ([], [])


def test_forged_citations_never_strike_nor_count_as_support(run, records, search_cache, tmp_path):
    # here Pro's register words meet a passage with no denial word: its claims are ruled supported
    studies = ("studies", "Studies show that trust, evidence and efficiency bring benefit and progress.")
    facts = write_collection(tmp_path / "facts", [*PASSAGES, studies])
    result = run(*checking(facts, search_cache), "model.bad_citation_rate=1.0")
    run_dir = result.run_dir
    assert result.manifest.stop_reason.startswith("verdict")
    assert not [e for e in records(run_dir / "events.jsonl") if e.event == "strike"]
    con = [c for c in checks_of(run_dir, records) if c.team == "con"]
    assert con and all(c.verdict == "pass" and c.fallback and c.strike == 0 for c in con)
    assert all(c.justification.startswith("no strike: the fact-checker's own citations fail") for c in con)
    marks = {r.citation.status for c in con for r in c.rulings if r.ruling == "contradicted"}
    assert marks == {"unsupported", "unknown"}  # both forgeries are made, and told apart
    # a made-up id stays in its ruling, marked, and out of the passages the check cites
    returned = {s.id: {h.id for h in s.hits} for s in records(run_dir / "public" / "searches.jsonl")}
    made_up = {r.citation.id for c in con for r in c.rulings if r.citation and r.citation.status == "unknown"}
    assert made_up and all(set(c.passages) <= set().union(*(returned[s] for s in c.searches)) for c in con)
    # a claim ruled supported on a forged citation is not counted supported: the pass is a fallback resting on nothing
    pro = [c for c in checks_of(run_dir, records) if c.team == "pro"]
    assert pro and {r.ruling for c in pro for r in c.rulings} == {"supported"}
    assert all(c.verdict == "pass" and c.fallback and c.evidence == [] for c in pro)
    assert all(
        c.justification.startswith(f"passed, not confirmed: {len(c.rulings)} claim(s): 0 supported")
        for c in pro
    )
    assert verify(run_dir) == ([], [])
    # and verify holds a run to that: the same check, passed as confirmed on the passage, is caught
    confirmed = {"id": "r0009.x", "fallback": False, "evidence": [f"[studies] (facts.jsonl) {studies[1]}"]}
    JsonlLog(run_dir / "public" / "factchecks.jsonl").append(pro[0].model_copy(update=confirmed))
    problems = verify(run_dir)[0]
    assert any("r0009.x passes on a ruling whose citation fails, not as a fallback" in p for p in problems)
    assert any("r0009.x gives as evidence ['[studies] " in p for p in problems), problems


def test_ungrounded_checks_stay_the_default(settings):
    cfg = settings("format=moderated")
    assert cfg.format.fact_check == "ungrounded" and cfg.search.collection == ""


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (
            ("format.fact_check=grounded",),
            "search.collection: format.fact_check=grounded searches a collection",
        ),
        (("format.fact_check=grounded", "search.collection=/no/such/folder"), "search.collection: "),
        (("format.fact_check=web",), "format.fact_check: must be one of ungrounded, grounded"),
        (("format.max_claims=4",), "format.max_claims: must be in [1, 3]"),
    ],
)
def test_bad_fact_check_settings_are_one_line_before_any_folder(run, runs_root, overrides, key):
    with pytest.raises(ConfigError) as err:
        run("format=moderated", *overrides)
    assert str(err.value).startswith(key) and "\n" not in str(err.value)
    assert not runs_root.exists() or not any(runs_root.iterdir())


# -- verify: each check with a positive control ---------------------------------


def forged(struck: Path, tmp_path: Path, records, pick, **changes) -> list[str]:  # type: ignore[no-untyped-def]
    """A copy of the run with a copy of one check (the first ``pick`` accepts) appended, changed; verify's problems."""
    run_dir = Path(shutil.copytree(struck, tmp_path / "run"))
    assert verify(run_dir) == ([], [])
    check = next(c for c in checks_of(run_dir, records) if pick(c))
    JsonlLog(run_dir / "public" / "factchecks.jsonl").append(
        check.model_copy(update={"id": "r0009.x", **changes})
    )
    return verify(run_dir)[0]


def test_verify_catches_a_ruling_mark_the_passage_contradicts(struck, tmp_path, records):
    fail = next(c for c in checks_of(struck, records) if c.verdict == "fail")
    lie = [
        r.model_copy(update={"citation": r.citation.model_copy(update={"quote": "words it never had"})})
        for r in fail.rulings
    ]
    problems = forged(struck, tmp_path, records, lambda c: c.verdict == "fail", rulings=lie)
    assert any("marks denial supported; the passage says otherwise" in p for p in problems), problems


def test_verify_catches_a_strike_on_claims_not_found(struck, tmp_path, records):
    problems = forged(struck, tmp_path, records, lambda c: c.team == "pro", verdict="fail", strike=1)
    assert any("strike without a contradicting passage" in p for p in problems), problems


def test_verify_catches_a_contradicted_claim_passed(struck, tmp_path, records):
    problems = forged(struck, tmp_path, records, lambda c: c.verdict == "fail", verdict="pass", strike=0)
    assert any("passes a claim its passage contradicts" in p for p in problems), problems


def test_verify_catches_a_check_listing_a_passage_its_searches_never_returned(struck, tmp_path, records):
    made_up = ["denial", "no-such-passage.7"]
    problems = forged(struck, tmp_path, records, lambda c: c.verdict == "fail", passages=made_up)
    assert any("lists passages ['no-such-passage.7'] its searches never returned" in p for p in problems)


# -- kill and resume inside a check, the search server killed too ---------------


def same_debate(run_dir: Path, reference: Outcome) -> None:
    """The same transcript and public records as ``reference`` (a search's latency aside)."""
    assert verify(run_dir) == ([], [])
    got = Outcome.of(run_dir)
    for name, want in reference.logs.items():
        have = got.logs[name]
        if name == "public/searches.jsonl":
            want, have = ([(i, {**r, "latency_s": 0}) for i, r in rows] for rows in (want, have))
        assert have == want, name
    assert (got.status, got.stop_reason) == ("completed", reference.stop_reason)


@pytest.mark.heavy
def test_kill_inside_a_grounded_check_and_of_its_search_server_then_resume(run, grounded_check, tmp_path):
    from harness.search.process import find_child

    args = (*grounded_check, "search.transport=mcp", "retry.initial_s=0", "retry.jitter_s=0")
    reference = Outcome.of(run(*args, f"runs_root={tmp_path / 'reference'}").run_dir)
    seen: list[str] = []

    def build(cfg):  # type: ignore[no-untyped-def]
        model = build_model(cfg)
        inner = model.complete

        def complete(request: ModelRequest) -> Completion:
            seen.append(f"{request.tags['team']}.{request.tags['role']}.{request.tags['iteration']}")
            if seen[-1] == "con.fact_claims.0":  # the server dies before Con's first check searches
                server = find_child("harness.search")
                assert server is not None, "the run's search server is our child"
                os.kill(server, signal.SIGKILL)
            if seen[-1] == "con.fact_ruling1.1":  # the run dies mid-check, its searches landed
                raise RuntimeError("crash inside a fact-check")
            return inner(request)

        model.complete = complete  # type: ignore[method-assign]
        return model

    with pytest.raises(RuntimeError, match="crash inside a fact-check"):
        run(*args, f"runs_root={tmp_path / 'crashed'}", build=build)
    (run_dir,) = (tmp_path / "crashed").iterdir()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["event"] == "search_restart"] == ["search_restart"]
    landed = [
        json.loads(line)["id"] for line in (run_dir / "public" / "searches.jsonl").read_text().splitlines()
    ]
    assert "r0002.con.fact_search.i1.1" in landed  # the crashed check's searches are replayed, not repeated
    resume_run(run_dir)
    same_debate(run_dir, reference)


# -- the real path -----------------------------------------------------------------


@pytest.mark.slow
def test_one_moderated_exchange_of_smollm2_with_grounded_checks_over_the_kjv(run, records, tmp_path):
    from harness.export.styles import export_run

    result = run(
        "format=moderated",
        "model=smollm2",
        "format.fact_check=grounded",
        "search.collection=kjv",
        f"search.cache_dir={tmp_path / 'cache'}",
        "format.exchanges=1",
        "format.max_speech_retries=1",
        'topic.text="Wisdom is better than strength"',
        "llm.max_tokens=128",
        "model.n_threads=1",
    )
    run_dir, manifest = result.run_dir, result.manifest
    assert manifest.status == "completed"
    checks = checks_of(run_dir, records)
    assert checks and all(c.grounded and c.model == "local:smollm2" for c in checks)
    searches = [s for s in records(run_dir / "public" / "searches.jsonl") if isinstance(s, SearchRecord)]
    assert all(s.collection == "kjv" and h.source.startswith("KJV, ") for s in searches for h in s.hits)
    # whatever a small model cites is marked; a strike always rests on a passage its search returned
    cites = [r.citation for c in checks for r in c.rulings if r.citation]
    assert all(c.status in ("supported", "unsupported", "unknown") for c in cites)
    assert all(c.passages for c in checks if c.verdict == "fail")
    assert verify(run_dir) == ([], [])
    report = export_run(run_dir, "md")
    assert all(f"Fact-check of {c.team}'s {c.stage}, attempt {c.iteration + 1}" in report for c in checks)
    assert all("Rulings: " in report for c in checks if c.rulings)
    strikes = [
        e for e in records(run_dir / "events.jsonl") if isinstance(e, EventRecord) and e.event == "strike"
    ]
    assert len(strikes) == sum(c.verdict == "fail" for c in checks)


# -- analysis: the fact-checker's process signals -----------------------------------


def rates(checks: list[FactCheckRecord]) -> dict[str, float]:
    """The three signals computed from the records themselves (NaN: nothing to divide by)."""
    ruled = [r for c in checks for r in c.rulings]
    cites = [r.citation for r in ruled if r.citation]
    strikes = [c for c in checks if c.verdict == "fail"]
    backed = [
        c
        for c in strikes
        if any(
            r.ruling == "contradicted" and r.citation and r.citation.status == "supported" for r in c.rulings
        )
    ]

    def share(part: list, whole: list) -> float:  # type: ignore[type-arg]
        return len(part) / len(whole) if whole else float("nan")

    return {
        "factcheck_precision": share([c for c in cites if c.status == "supported"], cites),
        "strike_backed_share": share(backed, strikes),
        "claim_not_found_rate": share([r for r in ruled if r.ruling == "not_found"], ruled),
    }


def test_process_signals_say_how_grounded_the_checks_were(struck, run, records, grounded_check):
    from analysis import load_runs, process_signals
    from analysis.grounding import FACTCHECK_SIGNALS, factcheck_checks, factcheck_summary

    forged_run = run(*grounded_check, "model.bad_citation_rate=1.0").run_dir
    ungrounded = run("format=moderated", "model.factcheck_fail_rate=1.0", "format.max_strikes=1").run_dir
    for run_dir in (struck, forged_run, ungrounded):
        tables = load_runs(run_dir, cache=False)
        checks = checks_of(run_dir, records)
        per_speech = process_signals(tables).set_index(["round", "team"])
        per_side = factcheck_summary(factcheck_checks(tables)).set_index("team")
        for (round_, team), row in per_speech.iterrows():
            want = rates([c for c in checks if (c.round, c.team) == (round_, team)])
            assert row[FACTCHECK_SIGNALS].to_dict() == pytest.approx(want, nan_ok=True)
        for team, row in per_side.iterrows():
            mine = [c for c in checks if c.team == team]
            assert (row.checks, row.strikes) == (len(mine), sum(c.verdict == "fail" for c in mine))
            assert row[FACTCHECK_SIGNALS].to_dict() == pytest.approx(rates(mine), nan_ok=True)
    # Con's every strike rests on a passage, Pro's every claim was not found; an ungrounded strike rests on none
    struck_sides = factcheck_summary(factcheck_checks(load_runs(struck, cache=False))).set_index("team")
    assert struck_sides.loc["con", "strike_backed_share"] == 1.0
    assert struck_sides.loc["pro", "claim_not_found_rate"] == 1.0
    ungrounded_sides = factcheck_summary(factcheck_checks(load_runs(ungrounded, cache=False)))
    assert set(ungrounded_sides.strike_backed_share.dropna()) == {0.0}
