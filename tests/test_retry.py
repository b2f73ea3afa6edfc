"""Retries: transient errors and rate limits are retried with backoff and
recorded as ``retry`` events; anything else fails fast, in one line naming
role, round and model, with the run marked ``failed`` and the error kept as data."""

from __future__ import annotations

import json

import pytest

from harness.models.base import Completion, ModelRequest, ProviderError
from harness.models.retry import call_with_retry, classify
from harness.models.scripted import ScriptedModel
from harness.runtime.context import ModelCallError
from harness.schema import RetryConfig

FAST = ("retry.initial_s=0", "retry.jitter_s=0")


class HttpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


class RateLimitError(Exception):
    """Named like the SDKs' classes, with no status attribute."""


class APITimeoutError(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ProviderError("slow down", 429), "rate_limit"),
        (ProviderError("boom", 503), "transient"),
        (ProviderError("boom", 500), "transient"),
        (ProviderError("timeout", 408), "transient"),
        (ProviderError("bad key", 401), "fatal"),
        (ProviderError("bad request", 400), "fatal"),
        (HttpError(502), "transient"),
        (RateLimitError("quota"), "rate_limit"),
        (APITimeoutError("read timed out"), "transient"),
        (TimeoutError(), "transient"),
        (ConnectionResetError(), "transient"),
        (ValueError("bug"), "fatal"),
        (KeyError("bug"), "fatal"),
    ],
)
def test_classify(exc, kind):
    assert classify(exc) == kind


class Flaky:
    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_transient_errors_are_retried_with_exponential_backoff(monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr("time.sleep", sleeps.append)  # tenacity sleeps through time.sleep
    fn = Flaky(ProviderError("a", 503), ProviderError("b", 429), TimeoutError("c"))
    seen: list[tuple[int, str, float]] = []
    policy = RetryConfig(max_attempts=5, initial_s=0.5, max_s=1.5, jitter_s=0)
    result = call_with_retry(fn, policy, lambda n, e, w: seen.append((n, str(e), w)))
    assert result == "ok" and fn.calls == 4
    assert seen == [(1, "a", 0.5), (2, "b", 1.0), (3, "c", 1.5)]  # doubled, then capped
    assert sleeps == [0.5, 1.0, 1.5]


def waits_for(policy: RetryConfig, failures: int) -> list[float]:
    """The waits the policy announces over ``failures`` transient errors in a row."""
    waits: list[float] = []
    fn = Flaky(*(ProviderError("x", 503) for _ in range(failures)))
    call_with_retry(fn, policy, lambda n, e, w: waits.append(w))
    return waits


def test_jitter_stays_within_its_bound(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    waits = waits_for(RetryConfig(max_attempts=7, initial_s=0.1, max_s=100, jitter_s=0.05), 6)
    assert len(waits) == 6
    for n, wait in enumerate(waits):
        assert 0.1 * 2**n <= wait <= 0.1 * 2**n + 0.05


def test_backoff_never_exceeds_max_even_with_jitter(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    waits = waits_for(RetryConfig(max_attempts=6, initial_s=1, max_s=3, jitter_s=5), 5)
    assert len(waits) == 5 and all(1 <= w <= 3 for w in waits)
    assert waits[-2:] == [3, 3]  # 8 s and 16 s of backoff, capped


def test_fatal_error_is_not_retried():
    fn = Flaky(ProviderError("bad key", 401))
    seen: list[int] = []
    with pytest.raises(ProviderError, match="bad key"):
        call_with_retry(fn, RetryConfig(max_attempts=5, initial_s=0, jitter_s=0), lambda *a: seen.append(1))
    assert fn.calls == 1 and seen == []


def test_retries_stop_at_max_attempts_and_reraise_the_last_error():
    fn = Flaky(*(ProviderError(f"e{i}", 503) for i in range(10)))
    with pytest.raises(ProviderError, match="e2"):
        call_with_retry(fn, RetryConfig(max_attempts=3, initial_s=0, jitter_s=0))
    assert fn.calls == 3


def test_transient_errors_in_a_run_are_retried_and_recorded(run, records):
    result = run("rounds=3", "model.error_rate=0.3", *FAST)
    run_dir = result.run_dir
    retries = [e for e in records(run_dir / "events.jsonl") if e.event == "retry"]
    assert retries, "seeded error_rate=0.3 should inject at least one error"
    for e in retries:
        assert e.error is not None and e.error.kind == "transient"
        assert e.error.type == "ProviderError" and "injected" in e.error.message
        assert e.model == "scripted:default"
        assert e.detail.startswith("attempt ") and "retrying in 0.00s" in e.detail
        assert e.role in ("persona", "thinking", "critique") and e.team in ("pros", "cons")
    assert len({e.id for e in retries}) == len(retries)
    assert result.manifest.status == "completed"
    assert result.manifest.counts.retries == len(retries)
    assert len(records(run_dir / "shared_memory.jsonl")) == 6


def test_exhausted_retries_fail_the_run(run, records):
    with pytest.raises(ModelCallError) as caught:
        run("rounds=2", "model.error_rate=1.0", "retry.max_attempts=3", *FAST)
    assert caught.value.info.kind == "transient"
    message = str(caught.value)
    assert "role=persona" in message and "round=1" in message and "model=scripted:default" in message


class FailsAt:
    """Scripted, except one (round, team, role) raises a fatal error, once."""

    def __init__(self, spec: str, where: tuple[int, str, str]) -> None:
        self.inner = ScriptedModel(spec)
        self.spec = spec
        self.where = where
        self.calls: list[tuple[int, str, str]] = []

    def complete(self, request: ModelRequest) -> Completion:
        tags = request.tags
        at = (tags.get("round"), tags.get("team"), tags.get("role"))
        self.calls.append(at)  # type: ignore[arg-type]
        if at == self.where:
            raise ProviderError("Error code: 401 - invalid api key", status_code=401)
        return self.inner.complete(request)

    def model_files(self) -> dict[str, str]:
        return {}


def test_fatal_error_fails_fast_and_the_manifest_keeps_it_as_data(run, records, runs_root):
    models: list[FailsAt] = []

    def build(cfg):  # type: ignore[no-untyped-def]
        models.append(FailsAt(cfg.spec, (2, "cons", "thinking")))
        return models[-1]

    with pytest.raises(ModelCallError) as caught:
        run("rounds=3", "retry.max_attempts=5", *FAST, build=build)
    message = str(caught.value)
    assert "\n" not in message
    for part in ("role=thinking", "team=cons", "round=2", "model=scripted:default", "401"):
        assert part in message
    (model,) = models  # one model object shared by all roles
    assert model.calls.count((2, "cons", "thinking")) == 1  # no retry
    assert model.calls[-1] == (2, "cons", "thinking")  # nothing ran after it
    (run_dir,) = runs_root.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"] == {
        "kind": "fatal",
        "type": "ProviderError",
        "message": "Error code: 401 - invalid api key",
    }
    assert [h["action"] for h in manifest["history"]] == ["start", "fail"]
    events = records(run_dir / "events.jsonl")
    assert [(e.event, e.round, e.team, e.role) for e in events] == [("error", 2, "cons", "thinking")]
    assert events[0].error is not None and events[0].error.kind == "fatal"


def test_failed_run_counts_the_rounds_it_finished(run, runs_root):
    fails = lambda cfg: FailsAt(cfg.spec, (2, "cons", "thinking"))  # noqa: E731
    with pytest.raises(ModelCallError):
        run("rounds=3", "topic.generate=true", *FAST, build=fails)
    (run_dir,) = runs_root.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["counts"]["rounds_completed"] == 1  # round 1 finished; snapshot round-0001 exists
    assert manifest["topic"]  # the generated motion the debate ran on


class Headed(Exception):
    """An SDK error carrying its HTTP response's headers."""

    def __init__(self, **headers: str) -> None:
        super().__init__("HTTP 429")
        self.status_code = 429
        self.response = type("Response", (), {"headers": headers})()


@pytest.mark.parametrize(
    ("headers", "asked"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "soon"}, None),  # neither seconds nor an HTTP date
        ({}, None),
    ],
)
def test_retry_after_header(headers, asked):
    from harness.models.retry import retry_after

    assert retry_after(Headed(**headers)) == asked


def test_retry_after_as_an_http_date():
    from datetime import timedelta
    from email.utils import format_datetime

    from harness.models.retry import retry_after
    from harness.store.records import utcnow

    later = utcnow().replace(microsecond=0) + timedelta(seconds=30)
    assert 25 < retry_after(Headed(**{"retry-after": format_datetime(later, usegmt=True)})) <= 30
