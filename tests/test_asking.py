"""The agents' check-then-ask helper and the self-registering model registry."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.agents.asking import once
from harness.models import registry
from harness.models.base import ModelConfigError
from harness.schema import ModelConfig
from harness.store.memory import JsonlLog
from harness.store.records import SummaryRecord, record_id


def summary(rid: str, text: str) -> SummaryRecord:
    return SummaryRecord(id=rid, round=1, role="summarizer", text=text)


def test_once_makes_a_record_once_and_replays_it(tmp_path: Path) -> None:
    log: JsonlLog[SummaryRecord] = JsonlLog(tmp_path / "summaries.jsonl", fsync=False)
    rid = record_id(1, None, "summary", 0)
    made: list[str] = []

    def make(text: str) -> SummaryRecord:
        made.append(text)
        return summary(rid, text)

    first = once(log, rid, lambda: make("first"))
    # a resumed run: the same log reopened, the node replayed with another answer
    again = once(JsonlLog(log.path, fsync=False), rid, lambda: make("second"))
    assert (first.text, again.text, made) == ("first", "first", ["first"])
    assert len(log.path.read_text().splitlines()) == 1


def test_once_appends_nothing_when_nothing_is_made(tmp_path: Path) -> None:
    log: JsonlLog[SummaryRecord] = JsonlLog(tmp_path / "summaries.jsonl", fsync=False)
    assert once(log, record_id(1, None, "summary", 0), lambda: None) is None
    assert len(log) == 0


def test_a_registered_provider_builds_and_checks_its_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PROVIDERS", dict(registry.PROVIDERS))
    checked: list[str] = []

    def check(cfg: ModelConfig, key: str, knobs: str | None) -> None:
        checked.append(key)
        if cfg.spec.endswith(":bad"):
            raise ModelConfigError(f"{key}: no such model")

    @registry.provider("fake", check=check)
    def fake(cfg: ModelConfig) -> registry.ChatModel:
        return registry.PROVIDERS["scripted"].build(replace(cfg, spec="scripted:default"))

    assert registry.build_model(ModelConfig(spec="fake:any")).spec == "scripted:default"
    registry.check_model(ModelConfig(spec="fake:any"), key="roles.judge.spec")
    with pytest.raises(ModelConfigError, match="roles.critic.spec: no such model"):
        registry.check_model(ModelConfig(spec="fake:bad"), key="roles.critic.spec")
    assert checked == ["roles.judge.spec", "roles.critic.spec"]


def test_a_provider_no_factory_names_is_langchains() -> None:
    with pytest.raises(ModelConfigError, match=r"model.spec: unknown provider 'nosuch' in 'nosuch:x'"):
        registry.check_model(ModelConfig(spec="nosuch:x"))
