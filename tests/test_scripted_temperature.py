"""The scripted model's temperature and gradual drift: temperature changes what
it writes (seeded), 0.7 writes exactly what it wrote before temperature
mattered, and ``persona_drift_rate`` moves the register a little each round."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from harness.agents.persona import PersonaOutput
from harness.agents.thinking import ThinkingOutput
from harness.models.base import ModelRequest
from harness.models.scripted import ScriptedModel, drift_share
from harness.models.scripted_style import STRAY, SWITCHED, WORDS
from harness.resume import resume_run
from harness.schema import ConfigError

SCHEMAS = {"persona": PersonaOutput.model_json_schema(), "thinking": ThinkingOutput.model_json_schema()}
# sha256 of replies() at 0.7 from the model before temperature mattered (commit bbcf416),
# with issue 39's sentence ends: the same text with a period after every few words
# (checked against bbcf416's digests, 6c84633... and 80e5a4b..., with only periods inserted),
# and its capital at each text's start (checked against f1f92f9... and c19bc06...: every
# text equal but for its first letter, upper-cased, and nothing else)
BEFORE = {
    None: "773684cf6698302a0b24ea7cf406f48183a5f45565d59401f37cc6c81e09d7f5",
    4: "2d76dd0dfe66826e0cff3c1e4bfebec5706d709e5d7982f8b3fd6652e8d79ad3",
}


def replies(model: ScriptedModel, temperature: float = 0.7, rounds: int = 6) -> list[str]:
    """Persona, thinking and free-text replies of both sides over ``rounds`` rounds."""
    out = []
    for round_ in range(1, rounds + 1):
        for side, team in (("for", "pros"), ("against", "cons")):
            for role, schema in (*SCHEMAS.items(), ("free", None)):
                tags = {"round": round_, "team": team, "role": role, "iteration": 0, "side": side}
                request = ModelRequest(
                    messages=[{"role": "user", "content": "x"}],
                    schema=schema,
                    temperature=temperature,
                    seed=round_ * 7,
                    tags=tags,
                )
                out.append(model.complete(request).text)
    return out


def arguments(texts: list[str]) -> list[list[str]]:
    """The words of each thinking reply's argument."""
    return [json.loads(t)["argument"].split() for t in texts if t.startswith('{"scratchpad"')]


def digest(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


@pytest.mark.parametrize("switch", [None, 4])
def test_reference_temperature_writes_what_it_wrote_before(switch):
    model = ScriptedModel("scripted:default", seed=11, persona_switch_round=switch)
    assert digest(replies(model, 0.7)) == BEFORE[switch]


def test_output_differs_across_temperatures_and_repeats_at_one():
    texts = {t: replies(ScriptedModel(seed=3), t) for t in (0.0, 0.3, 0.7, 1.2, 2.0)}
    assert len({digest(v) for v in texts.values()}) == len(texts)
    for t, first in texts.items():
        assert replies(ScriptedModel(seed=3), t) == first, f"not repeatable at temperature {t}"


def test_cold_narrows_the_banks_and_hot_strays_and_varies_length():
    register = {w for bank in WORDS.values() for w in bank}

    def used(t: float) -> set[str]:
        return {w for a in arguments(replies(ScriptedModel(seed=5), t, 10)) for w in a} & register

    assert len(used(0.0)) == 2  # one word per side
    assert len(used(0.0)) < len(used(0.3)) < len(used(0.7))
    hot = arguments(replies(ScriptedModel(seed=5), 1.5, 10))
    assert {w for a in hot for w in a} & set(STRAY), "no off-register words when hot"
    assert len({len(a) for a in hot}) > 3, "argument length does not vary when hot"
    assert {len(a) for a in arguments(replies(ScriptedModel(seed=5), 0.7, 10))} == {30}


def switched_share(words: list[str]) -> float:
    register = [w for i, w in enumerate(words) if i % 3]  # every third word is filler
    return sum(w in SWITCHED for w in register) / len(register)


def test_drift_rate_moves_the_register_gradually_and_monotonically():
    rounds = 12
    texts = replies(ScriptedModel(seed=2, persona_drift_rate=0.1), 0.7, rounds)
    shares = [switched_share(a) for a in arguments(texts)]  # two per round: pros, cons
    blocks = [sum(shares[i : i + 6]) / 6 for i in range(0, 2 * rounds, 6)]  # three rounds a block
    assert shares[:2] == [0.0, 0.0]  # round 1 is the reference register
    assert blocks == sorted(blocks) and blocks[-1] - blocks[0] > 0.6, blocks
    assert 0 < blocks[1] < 1, "the switch was not gradual"
    # at one seed and round, a higher rate switches every word a lower one did
    low, high = (arguments(replies(ScriptedModel(seed=2, persona_drift_rate=r), 0.7, 4)) for r in (0.1, 0.3))
    for a, b in zip(low, high, strict=True):
        assert all(y in SWITCHED for x, y in zip(a, b, strict=True) if x in SWITCHED)
    assert drift_share(0.1, 1) == 0.0 and drift_share(0.1, 30) == 1.0


def test_drifting_persona_evolves_through_graded_styles(run, records):
    result = run("rounds=10", "model.persona_drift_rate=0.1")
    personas = [r for r in records(result.run_dir / "pros" / "persona.jsonl") if r.iteration == 0]
    evolved = [r.round for r in personas if r.decision == "evolve"]
    assert evolved == [4, 6, 9]  # shares 0.3, 0.5, 0.8 cross the grades 1/4, 2/4, 3/4
    assert "calm analyst" in personas[0].persona and "furious contrarian" in personas[-1].persona
    assert [r.version for r in personas] == sorted(r.version for r in personas)


def test_planted_switch_still_works_away_from_the_reference(run, records):
    result = run("rounds=6", "model.persona_switch_round=4", "llm.temperature=1.2")
    for team, side in (("pros", "for"), ("cons", "against")):
        personas = [r for r in records(result.run_dir / team / "persona.jsonl") if r.iteration == 0]
        assert [r.round for r in personas if r.decision == "evolve"] == [4]
        published = [r for r in records(result.run_dir / "shared_memory.jsonl") if r.team == team]
        for record in published:
            words = set(record.text.split())
            before, after = words & set(WORDS[side]), words & set(SWITCHED)
            assert (bool(after), not before) == ((record.round >= 4,) * 2), (record.round, words)


def test_runs_away_from_the_reference_repeat_exactly(run):
    first = run("rounds=3", "llm.temperature=1.3", "model.persona_drift_rate=0.2", "run_name=a")
    second = run("rounds=3", "llm.temperature=1.3", "model.persona_drift_rate=0.2", "run_name=b")
    reference = run("rounds=3", "run_name=c")
    text = [(r.run_dir / "shared_memory.jsonl").read_text() for r in (first, second, reference)]
    published = [[json.loads(line)["text"] for line in t.splitlines()] for t in text]
    assert published[0] == published[1] != published[2]


def test_drift_rate_out_of_range_is_one_line_naming_the_key(settings):
    with pytest.raises(ConfigError, match=r"^model\.persona_drift_rate: must be in \[0, 1\], got 1\.5$"):
        settings("model.persona_drift_rate=1.5")


def test_a_run_made_before_the_drift_rate_resumes(run):
    result = run("rounds=2")
    for name in ("fingerprint.json", "config.yaml"):  # as a run made before the key existed
        path = result.run_dir / name
        data = json.loads(path.read_text()) if name.endswith("json") else yaml.safe_load(path.read_text())
        model = data["parts"]["config"]["model"] if name.endswith("json") else data["model"]
        del model["persona_drift_rate"]
        path.write_text(json.dumps(data) if name.endswith("json") else yaml.safe_dump(data))
    extended = resume_run(result.run_dir, overrides=["rounds=3"])
    assert extended.manifest.status == "completed"
    assert extended.manifest.counts.rounds_completed == 3
