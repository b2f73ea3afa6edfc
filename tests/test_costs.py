"""Dollars and budgets (docs/costs.md): the price table, a cost on every
call, budgets that stop a run cleanly before the call that could cross them,
and a resume with a raised budget that ends in the unbudgeted transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_cfg

from harness.config import resolve
from harness.engine.resuming import resume_run
from harness.models.base import Completion
from harness.models.prices import PriceError, format_usd, load_prices
from harness.runtime.budget import Budget, BudgetExhausted, Budgets
from harness.schema import ConfigError
from harness.store.reader import ledger
from harness.store.records import RunCounts, Usage

# -- the price table -----------------------------------------------------------


def test_the_shipped_table_loads_with_a_source_and_date_for_every_entry():
    table = load_prices()
    assert "openai:gpt-4o-mini" in table.entries
    providers = {spec.split(":")[0] for spec in table.entries}
    assert {"openai", "anthropic", "google_genai"} <= providers
    for spec, price in table.entries.items():
        assert price.source in providers and price.as_of[:2] == "20", spec


def test_a_call_costs_its_tokens_at_the_entry_s_rates():
    table = load_prices(models={"openai:m": {"input": 2.0, "output": 8.0, "cache_read": 0.5}})
    call = Completion("", input_tokens=1000, output_tokens=100, latency_s=0, cache_read_tokens=400)
    # 600 fresh at $2, 400 cached at $0.5, 100 out at $8 (per million)
    assert table.cost("openai:m", call) == pytest.approx((600 * 2 + 400 * 0.5 + 100 * 8) / 1e6)
    assert table.cost("openai:m-2025-01-31", call) == table.cost("openai:m", call)  # a dated snapshot
    assert table.cost("openai:mystery", call) is None  # unknown, never 0
    assert table.cost("scripted:any", call) == table.cost("local:smollm2", call) == 0.0


def test_unknown_spreads_through_sums_and_shows_as_unknown():
    known, unknown = Usage(calls=1, cost_usd=0.25), Usage(calls=1, cost_usd=None)
    assert (known + unknown).cost_usd is None and (known + known).cost_usd == 0.5
    counts = RunCounts(cost_usd=0.1) + RunCounts(cost_usd=None)
    assert counts.cost_usd is None and format_usd(counts.cost_usd) == "unknown"
    assert format_usd(0.0) == "$0" and format_usd(0.0123) == "$0.0123"


def test_a_malformed_price_file_is_one_line_naming_the_file(tmp_path: Path):
    bad = tmp_path / "prices.yaml"
    bad.write_text("models:\n  'openai:x': {input: cheap, output: 1}\n")
    with pytest.raises(PriceError) as err:
        load_prices(str(bad))
    assert str(bad) in str(err.value) and "openai:x" in str(err.value) and "\n" not in str(err.value)
    bad.write_text("models: [1, 2]\n")
    with pytest.raises(PriceError, match="'models' mapping"):
        load_prices(str(bad))


# -- budgets -------------------------------------------------------------------


def test_a_reservation_that_could_cross_the_limit_is_refused_and_undone():
    run, sweep = Budget("budget.", tokens=100), Budget("budget.sweep_", tokens=1000)
    budgets = Budgets((run, sweep))
    with budgets.call(None, 60) as held:
        held.pay(None, 50)  # the call used less than its worst case
    assert (run.spent_tokens, sweep.spent_tokens) == (50, 50)
    with pytest.raises(BudgetExhausted, match=r"budget.tokens=100"), budgets.call(None, 60):
        pass
    # the refused call held nothing anywhere
    assert (run._held_tokens, sweep._held_tokens, sweep.spent_tokens) == (0, 0, 50)


def test_a_dollar_budget_with_an_unpriced_model_is_refused_before_any_folder(runs_root, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run = resolve(compose_cfg(["model=openai", "model.spec=openai:no-such-price", f"runs_root={runs_root}"]))
    run.cfg.budget.usd = 1.0
    from harness.engine.execute import preflight

    with pytest.raises(ConfigError) as err:
        preflight(run)
    line = str(err.value)
    assert line.startswith("budget.usd:") and "openai:no-such-price" in line and "prices.models" in line
    assert not runs_root.exists()


def test_a_bad_budget_is_one_line(settings):
    for bad in ("budget.usd=0", "budget.tokens=-5", "budget.sweep_usd=0"):
        with pytest.raises(ConfigError, match=rf"^{bad.split('=')[0]}: must be > 0"):
            settings("experiment=debug", bad)


def published(run_dir: Path) -> list[tuple[str, str]]:
    shared = run_dir / "shared_memory.jsonl"
    return [(r["id"], r["kind"], r.get("text")) for r in map(json.loads, shared.read_text().splitlines())]


def test_a_token_budget_stops_cleanly_and_a_raised_one_resumes_to_the_same_debate(run, runs_root):
    whole = run("experiment=debug", "rounds=3", "run_name=whole")
    total = whole.manifest.counts.input_tokens + whole.manifest.counts.output_tokens
    assert ledger(whole.run_dir).input_tokens == whole.manifest.counts.input_tokens

    cut = run("experiment=debug", "rounds=3", "run_name=cut", f"budget.tokens={total // 2}")
    m = cut.manifest
    assert m.status == "interrupted" and (m.stop_reason or "").startswith("budget: ")
    spent = ledger(cut.run_dir)
    assert spent.input_tokens + spent.output_tokens <= total // 2  # reserved before, never crossed
    events = [json.loads(line) for line in (cut.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events].count("budget") == 1

    again = resume_run(cut.run_dir, overrides=[f"budget.tokens={total * 2}"])
    assert again.manifest.status == "completed"
    assert published(again.run_dir) == published(whole.run_dir)
    both = ledger(again.run_dir)
    assert both.input_tokens + both.output_tokens == total  # nothing paid twice


SIM_PRICE = r"prices.models={openai\:sim-model:{input:2.0,output:8.0}}"


@pytest.mark.network_loopback
def test_on_the_simulator_dollars_stop_a_run_and_the_ledger_equals_the_bill(run, monkeypatch):
    """The real langchain-openai client against the provider simulator: every
    call is priced, a dollar budget stops the run before the call that could
    cross it, a raised one finishes it, and the harness's ledger equals what
    the simulator billed, token for token."""
    from provider_sim import ProviderSim

    monkeypatch.setenv("OPENAI_API_KEY", "sk-costs")
    with ProviderSim() as sim:
        base = ("model=openai", "model.spec=openai:sim-model", f"model.kwargs.base_url={sim.base_url}")
        cut = run(*base, "rounds=2", SIM_PRICE, "budget.usd=0.004", "run_name=cut")
        assert cut.manifest.status == "interrupted" and cut.manifest.stop_reason.startswith("budget: ")
        spent = ledger(cut.run_dir)
        assert 0 < spent.cost_usd <= 0.004
        resumed = resume_run(cut.run_dir, overrides=["budget.usd=1"])
        bill = sim.billing("sk-costs")
    assert resumed.manifest.status == "completed"
    paid = ledger(resumed.run_dir)
    assert (paid.input_tokens, paid.output_tokens) == (bill.prompt_tokens, bill.completion_tokens)
    assert paid.cost_usd == pytest.approx((bill.prompt_tokens * 2 + bill.completion_tokens * 8) / 1e6)
    assert resumed.manifest.counts.cost_usd == pytest.approx(paid.cost_usd)  # every call ended in a record


# -- provider knobs and token details ------------------------------------------


def test_reasoning_and_cache_tokens_are_read_once_from_langchain_usage():
    from langchain_core.messages import AIMessage

    from harness.models.remote import completion_of

    reply = AIMessage(
        content="ok",
        usage_metadata={
            "input_tokens": 1000,
            "output_tokens": 300,
            "total_tokens": 1300,
            "input_token_details": {"cache_read": 600},
            "output_token_details": {"reasoning": 250},
        },
        response_metadata={"token_usage": {"cost": 0.0042}},
    )
    c = completion_of(reply, 0.1)
    assert (c.input_tokens, c.output_tokens, c.reasoning_tokens, c.cache_read_tokens) == (1000, 300, 250, 600)
    assert c.billed_usd == 0.0042
    table = load_prices(models={"openai:r": {"input": 1.0, "output": 4.0, "cache_read": 0.1}})
    # reasoning is inside output: 300 output tokens are billed, not 550
    assert table.cost("openai:r", c) == pytest.approx((400 * 1.0 + 600 * 0.1 + 300 * 4.0) / 1e6)


def test_reasoning_knobs_reach_the_client_and_a_wrong_one_is_one_line(settings, resolved, monkeypatch):
    from harness.engine.execute import preflight
    from harness.models.base import ModelConfigError
    from harness.models.remote import LangChainModel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = LangChainModel("openai:o4-mini", kwargs={}, reasoning_effort="low")
    assert model._chat(1.0, 64).reasoning_effort == "low"
    run = resolved("model=openai", "+roles.critic.thinking_budget=2048")
    with pytest.raises(ModelConfigError, match=r"^roles.critic.thinking_budget: openai takes no thinking"):
        preflight(run)
    with pytest.raises(ConfigError, match=r"^roles.critic.reasoning_effort: must be null or one of"):
        settings("model=openai", "+roles.critic.reasoning_effort=extreme")


# -- a sweep's budget ----------------------------------------------------------


def cell_calls(sweep_dir: Path) -> list[Usage]:
    """Every paid call of every cell of the sweep, from the replies each run kept."""
    from harness.store.records import ReplyRecord, parse_record

    calls = []
    for path in sweep_dir.glob("*/*/replies.jsonl"):
        for line in path.read_text().splitlines():
            record = parse_record(line)
            if isinstance(record, ReplyRecord):
                calls.append(record.usage)
    return calls


def test_a_sweep_budget_is_shared_by_the_cells_in_flight_and_raised_on_resume(tmp_path: Path):
    """Four cells in flight share budget.sweep_tokens: spend stops within the
    budget plus what the calls in flight used beyond their reservations (at
    most one call per cell in flight: the bound asserted), every cell is left
    interrupted or completed, and `harness.sweep resume` with a raised budget
    completes them all."""
    import subprocess
    import sys

    from harness.sweep.index import read_index

    sweep_dir, budget, in_flight = tmp_path / "sweep", 3000, 4
    cmd = [
        sys.executable,
        "-m",
        "harness.run",
        "-m",
        "experiment=debug",
        "rounds=3",
        "model.latency_s=0.02",
        "llm.temperature=0.1,0.4,0.7,1.0",
        f"budget.sweep_tokens={budget}",
        "progress=false",
        f"sweep.concurrency={in_flight}",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    cells = read_index(sweep_dir).cells
    assert {c.status for c in cells} <= {"interrupted", "completed"} and "interrupted" in {
        c.status for c in cells
    }
    calls = cell_calls(sweep_dir)
    spent, largest = (
        sum(u.input_tokens + u.output_tokens for u in calls),
        max(u.input_tokens + u.output_tokens for u in calls),
    )
    assert spent <= budget + in_flight * largest, (spent, budget, largest)

    again = subprocess.run(
        [sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir), "budget.sweep_tokens=1000000"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert {c.status for c in read_index(sweep_dir).cells} == {"completed"}


def test_a_sweep_budget_needs_the_in_process_launcher(tmp_path: Path):
    from harness.sweep.launcher import launcher_overrides

    with pytest.raises(
        ConfigError, match=r"^budget.sweep_usd: a sweep budget is shared .* sweep.concurrency=N"
    ):
        launcher_overrides(["-m", "llm.temperature=0.1,0.2", "budget.sweep_usd=5"])
    assert "hydra/launcher=inprocess" in launcher_overrides(
        ["-m", "budget.sweep_usd=5", "sweep.concurrency=2"]
    )


def test_the_live_page_shows_the_sweep_budget_used():
    from harness.view.live import budget_used

    index = {"task_overrides": ["llm.temperature=0.1,0.9", "budget.sweep_usd=2", "budget.sweep_tokens=1000"]}
    rows = [
        {"status": "completed", "cost": 0.5, "tokens": 300},
        {"status": "running", "cost": 0.25, "tokens": 100},
        {"status": "pending", "cost": None, "tokens": 0},
    ]
    assert budget_used(index, rows) == (
        "spent $0.7500 of budget.sweep_usd=$2 (38%) · 400 of budget.sweep_tokens=1000 tokens (40%)"
    )
    rows[1]["cost"] = None  # a cell with an unpriced model: unknown, never a smaller figure
    assert budget_used(index, rows).startswith("spent unknown of budget.sweep_usd=$2 ·")
    assert budget_used({"task_overrides": ["rounds=3"]}, rows) is None


def test_the_live_page_shows_the_budget_ctl_set_while_its_driver_runs(tmp_path):
    from harness.sweep.control import ControlEntry, append_entry, driver_lock
    from harness.view.live import budget_used
    from harness.view.watch import Driver

    def effect(words, ok=True):
        append_entry(tmp_path, ControlEntry(kind="effect", id=words[-1], words=words, ok=ok))

    effect(["set", "budget.sweep_usd=9"])  # a driver before this one: gone with it
    index, rows = (
        {"task_overrides": ["budget.sweep_usd=2"]},
        [{"status": "running", "cost": 0.25, "tokens": 1}],
    )
    driver = Driver()
    with driver_lock(tmp_path, "InProcessLauncher"):
        effect(["set", "budget.sweep_usd=0.5"])
        effect(["set", "budget.sweep_tokens=7"], ok=False)  # refused: changes nothing
        driver.refresh(tmp_path)
        assert budget_used(index, rows, driver.budgets) == "spent $0.2500 of budget.sweep_usd=$0.5 (50%)"
    driver.refresh(tmp_path)  # the driver ended: what ctl set lasted for it only
    assert budget_used(index, rows, driver.budgets) == "spent $0.2500 of budget.sweep_usd=$2 (12%)"
