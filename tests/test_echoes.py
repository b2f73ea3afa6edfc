"""Echoes of the instructions (issue 30 item 7): a reply text field that copies
``structured.echo_words`` consecutive words of its prompt's instructions or of
its schema, or holds only field names, is re-asked with the copied run quoted
and counts as a schema failure when the repairs run out; copying the quoted
material (the motion, the opponent's argument) is legitimate; 0 turns the
check off. The prompts
are the agents' own, built by their ``messages``; the model is a fake that
replies as told."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from analysis.echoes import echo_rates, echo_section
from analysis.load import Tables
from harness.agents import CritiqueAgent, ThinkingAgent, ThinkingOutput
from harness.agents.persona import PersonaAgent, PersonaOutput
from harness.models.altered import altered_run
from harness.models.base import Completion, ModelRequest
from harness.models.echo import config_texts, words
from harness.models.structured import generate_structured
from harness.runtime.context import AgentContext, EventLog, RoleModel, Seat, StepHook
from harness.schema import ConfigError
from harness.store.memory import JsonlLog
from harness.store.records import ArgumentRecord, EventRecord, PromptRecord, ReplyRecord, ThinkingRecord

MOTION = "Remote work is better for society than office work, because commuting wastes time."
SCRATCH = "Objection: offices build trust. Answer: trust grows from results, not desks."
REASONED = "Commuting costs each worker an hour a day, which is time lost to work and family."
PARAPHRASE = "This is your argument to publish, two to four sentences with a concrete reason."
OPPONENT = "Offices let juniors learn by watching seniors work through hard problems every single day."


class Replies:
    """A fake model that returns canned replies in order and keeps each request."""

    spec = "fake:replies"

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> Completion:
        self.requests.append(request)
        return Completion(self.texts.pop(0), input_tokens=10, output_tokens=5, latency_s=0.01)

    def model_files(self) -> dict[str, str]:
        return {}


def thought(argument: str) -> str:
    return json.dumps({"scratchpad": SCRATCH, "argument": argument})


def thinking_prompt(
    cfg: Any, rival: str | None = None, persona: str = "A careful debater."
) -> list[dict[str, str]]:
    """The thinking agent's real prompt, with ``rival`` as the other team's last turn."""
    shown = [
        ArgumentRecord(
            id="r0001.cons.argument.i0",
            round=1,
            team="cons",
            role="cons",
            text=rival or "",
            draft_id="d",
            critique_id=None,
            source="approved",
        )
    ]
    view = SimpleNamespace(
        name="pros",
        seat=Seat("pros", "PROS", "pros", "for the motion", ()),
        shared=SimpleNamespace(since_round=lambda round_: shown if rival else []),
    )
    agent = ThinkingAgent(SimpleNamespace(cfg=cfg), view)  # type: ignore[arg-type]
    return agent.messages(MOTION, 2, SimpleNamespace(persona=persona), None)  # type: ignore[arg-type]


def ask(model: Replies, messages: list[dict[str, str]], schema: Any, echo_words: int, instructions=()):  # type: ignore[no-untyped-def]
    return generate_structured(
        model.complete,
        messages,
        schema,
        temperature=0.5,
        max_tokens=256,
        seed=7,
        max_repairs=1,
        tags={"round": 1},
        echo_words=echo_words,
        instructions=instructions,
    )


def think(cfg: Any, model: Replies, echo_words: int, rival: str | None = None, **persona: str):  # type: ignore[no-untyped-def]
    messages = thinking_prompt(cfg, rival, **persona)
    return ask(model, messages, ThinkingOutput, echo_words, config_texts(cfg, echo_words))


def reasked_once(result: Any, model: Replies, copies: str, quoted: str) -> None:
    """The first reply refused as one that ``copies`` (the error's middle) the ``quoted``
    run, the second taken; the re-ask says why."""
    assert result.ok and result.attempts == 2
    assert result.errors == [
        f"{copies} ({quoted!r}) instead of writing what the field asks for in its own words"
    ]
    assert quoted in model.requests[1].messages[-1]["content"]


def test_a_paraphrased_label_is_rejected_and_the_reask_quotes_the_copied_run(settings):
    model = Replies(thought(PARAPHRASE), thought(REASONED))
    result = think(settings(), model, echo_words=8)
    assert result.value.argument == REASONED
    copied = "argument to publish, two to four sentences with a concrete reason"
    reasked_once(result, model, "argument: copies 11 words of the instructions", copied)


def test_echo_words_zero_turns_the_check_off(settings):
    cfg = settings("structured.echo_words=0")
    assert cfg.structured.echo_words == 0
    result = think(cfg, Replies(thought(PARAPHRASE)), echo_words=cfg.structured.echo_words)
    assert result.ok and result.value.argument == PARAPHRASE and result.attempts == 1


@pytest.mark.parametrize("value", ["-1", "2"])
def test_echo_words_must_be_zero_or_a_run(settings, value):
    with pytest.raises(ConfigError, match=r"^structured\.echo_words: must be 0 \(off\) or >= 3"):
        settings(f"structured.echo_words={value}")


def test_copying_the_motion_or_the_opponents_argument_passes(settings):
    argument = f"{MOTION} They say: {OPPONENT.lower()} Mentoring works online too."
    result = think(settings(), Replies(thought(argument)), echo_words=8, rival=OPPONENT)
    assert result.ok and result.attempts == 1 and not result.errors


def test_a_label_and_the_quoted_text_after_it_are_not_another_agents_line(settings):
    # "Persona: " + this persona reads like the persona agent's "- persona: one sentence
    # saying who your team is ..." line, which the thinking prompt does not show whole
    persona = "One sentence saying who your team is, said plainly."
    scratch = f"Persona: {persona} Test: does the commute argument hold?"
    model = Replies(json.dumps({"scratchpad": scratch, "argument": REASONED}))
    result = think(settings(), model, echo_words=8, persona=persona)
    assert result.ok and result.attempts == 1 and not result.errors


def critic(cfg: Any, model: Replies, tmp_path: Path) -> tuple[CritiqueAgent, JsonlLog[EventRecord]]:
    """The critique agent on a real ``AgentContext`` (so ``ask`` passes the config's
    texts), and the event log it writes to."""
    events: JsonlLog[EventRecord] = JsonlLog(tmp_path / "events.jsonl", fsync=False)
    roles = {"critic": RoleModel("critic", model, 0.2, 256)}  # type: ignore[arg-type]
    ctx = AgentContext(cfg, roles, EventLog(events), None, StepHook())
    view = SimpleNamespace(
        name="pros",
        seat=Seat("pros", "PROS", "pros", "for the motion", ()),
        critique=JsonlLog(tmp_path / "critique.jsonl", fsync=False),
    )
    return CritiqueAgent(ctx, view), events  # type: ignore[arg-type]


DRAFT = ThinkingRecord(
    id="r0001.pros.thinking.i0", round=1, team="pros", role="thinking", scratchpad=SCRATCH, draft=REASONED
)


def critique(feedback: str) -> str:
    return json.dumps({"critique_feedback": feedback, "is_approved": True})


def test_critic_feedback_copying_its_instructions_is_rejected(settings, tmp_path):
    # the strictness: "Reject vague or unsupported claims; approve arguments that are specific ..."
    cfg = settings("critic=balanced", "structured.max_repairs=3")
    echo = "Approve: reject vague or unsupported claims; approve arguments that are specific."
    sound = "The cost of commuting is concrete and answers the opposing point."
    revised = json.dumps(  # as SmolLM2's critic revised a draft (issue 30)
        {
            "critique_feedback": sound,
            "is_approved": False,
            "revised_argument": "Motion rejected, Draft argument passed, is_approved: false",
        }
    )
    model = Replies(critique("is_approved"), critique(echo), revised, critique(sound))
    agent, _ = critic(cfg, model, tmp_path)
    record = agent(MOTION, 1, 0, DRAFT)
    assert record.feedback == sound and record.is_approved and not record.fallback
    asks = [r.messages[-1]["content"] for r in model.requests[1:]]
    assert "critique_feedback: holds only field names ('is_approved')" in asks[0]
    assert "copies 10 words of the instructions ('reject vague or unsupported claims; approve" in asks[1]
    assert "revised_argument: writes the field name 'is_approved'" in asks[2]


def test_an_echo_that_outlasts_the_repairs_is_a_schema_failure(settings, tmp_path):
    cfg = settings("structured.max_repairs=1")
    # the field's line, then more than as much again: no label echo, but 9 words of it
    echo = critique("The draft's main flaw, or why it passes: it names a cost but never says who pays it.")
    agent, events = critic(cfg, Replies(echo, echo), tmp_path)
    record = agent(MOTION, 1, 0, DRAFT)
    assert record.fallback and record.feedback == "critic reply failed validation"
    (event,) = [e for e in events.since_round(0) if e.event == "schema_failure"]
    assert event.error is not None and event.error.type == "SchemaError"
    assert event.error.message.startswith("critique_feedback: copies 9 words of the instructions")


def jsonl(path: Path, records: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))


def test_echo_rates_on_hand_made_tables(settings, tmp_path):
    cfg = settings()
    prompt = thinking_prompt(cfg)
    spec = "local:smollm2"
    jsonl(
        tmp_path / "run" / "pros" / "prompts.jsonl",
        [
            PromptRecord(
                id=f"r000{r}.pros.thinking.i0.prompt", round=r, team="pros", role="thinking", messages=prompt
            )
            for r in (1, 2)
        ],
    )
    replies = [(1, 0, PARAPHRASE), (1, 1, REASONED), (2, 0, PARAPHRASE), (2, 1, PARAPHRASE)]
    jsonl(
        tmp_path / "run" / "pros" / "replies.jsonl",
        [
            ReplyRecord(
                id=f"r000{r}.pros.thinking.i0.reply.{a}",
                round=r,
                team="pros",
                role="thinking",
                model=spec,
                attempt=a,
                request_sha="x",
                text=thought(text),
            )
            for r, a, text in replies
        ],
    )
    turns = [REASONED, PARAPHRASE, MOTION, f"Indeed: {MOTION}"]  # one echo; the motion is quoted material
    runs = pd.DataFrame(
        [
            {
                "run_id": "run",
                "seats": '["pros"]',
                "cfg.model.spec": spec,
                "cfg.topic.text": MOTION,
                "cfg.critic.strictness": cfg.critic.strictness,
            }
        ]
    )
    tables = Tables(
        root=tmp_path,
        runs=runs,
        turns=pd.DataFrame({"run_id": "run", "team": "pros", "model": spec, "text": turns}),
        drafts=pd.DataFrame(columns=["run_id", "team", "text", "checker", "critic_fallback", "feedback"]),
        personas=pd.DataFrame(),
        events=pd.DataFrame(
            [
                {
                    "run_id": "run",
                    "round": 2,
                    "team": "pros",
                    "role": "thinking",
                    "iteration": 0,
                    "event": "schema_failure",
                }
            ]
        ),
        public=pd.DataFrame(),
        run_dirs={"run": tmp_path / "run"},
    )
    rates = echo_rates(SimpleNamespace(tables=tables)).set_index("role")  # type: ignore[arg-type]
    published, replied = rates.loc["published"], rates.loc["thinking"]
    assert (published.texts, published.echoes, published.echo_rate) == (4, 1, 0.25)
    assert (published.schema_failures, published.asks, published.schema_failure_rate) == (1, 2, 0.5)
    assert (replied.texts, replied.echoes, replied.accepted, replied.accepted_echoes) == (4, 3, 1, 0)
    assert (replied.schema_failures, replied.schema_failure_rate) == (1, 0.5)
    lines = echo_section(SimpleNamespace(tables=tables))  # type: ignore[arg-type]
    assert (
        f"- 1 of 4 published turns of {spec} (25.0%) echo their instructions or schema (8 words of them"
        in "\n".join(lines)
    )


def test_cells_starting_together_parse_the_prompt_code_once(monkeypatch):
    """64 cells of an in-process sweep asking at once: each prompt module is parsed
    once in the process, not once a thread (functools.cache alone lets them race)."""
    import threading

    from harness.models import echo

    parsed: list[str] = []
    real = echo.literals

    def counting(source: str):  # type: ignore[no-untyped-def]
        parsed.append(source)
        return real(source)

    monkeypatch.setattr(echo, "literals", counting)
    echo._templates.cache_clear()
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        echo.templates()

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(parsed) == len(echo.prompt_code())
    echo._templates.cache_clear()  # the next test parses the real thing again


def test_a_line_copied_across_its_round_number_is_rejected(settings):
    # judge_refine's Pro wrote its prompt's line with the round filled in (SmolLM2):
    # each side of the round's field is under 8 words, the line across it is not
    from harness.agents.advocate import AdvocateAgent, ArgumentOutput

    line = "The judge's evaluation of round 1 follows as its own message."
    argued = f"{line} Commuting costs each worker an hour a day, time lost to work and family."
    cfg = settings("format=judge_refine")
    agent = AdvocateAgent(SimpleNamespace(cfg=cfg), None, "argument", "pro")  # type: ignore[arg-type]
    for heard, refused in (([("Judge", "Sound, but name who pays.")], True), ([], False)):
        model = Replies(json.dumps({"argument": argued}), json.dumps({"argument": REASONED}))
        result = ask(model, agent.messages(MOTION, MOTION, 2, heard, None), ArgumentOutput, echo_words=8)
        assert result.ok and result.attempts == (2 if refused else 1)
        # shown the line: copying it is an echo; not shown it (round 1's prompt), the same words pass
        assert result.errors == (
            [
                f"argument: copies 12 words of the instructions ({line[:-1]!r}) instead of writing what "
                "the field asks for in its own words"
            ]
            if refused
            else []
        )


def persona_prompt(cfg: Any) -> list[dict[str, str]]:
    """The persona agent's real prompt, round 2, no transcript shown."""
    view = SimpleNamespace(
        persona=SimpleNamespace(last=lambda: None), seat=Seat("pros", "PROS", "pros", "for the motion", ())
    )
    agent = PersonaAgent(SimpleNamespace(cfg=cfg), view)  # type: ignore[arg-type]
    agent.debate = lambda round_: ""  # type: ignore[method-assign]
    return agent.messages(MOTION, 2, None)


def test_a_persona_copying_its_instruction_with_words_changed_is_rejected(settings):
    # SmolLM2's personas, in 9 recorded runs: its line "one sentence saying who your team
    # is and how it argues" with a word added and two changed; no 8 words of it in a row
    echo = "One sentence saying who your current team is and how they argue."
    own = "Pragmatic economists who argue from commuting costs and measured output."
    replies = [
        json.dumps({"decision": "evolve", "persona": p, "rationale": "The debate moved on."})
        for p in (echo, own)
    ]
    model = Replies(*replies)
    result = ask(model, persona_prompt(settings()), PersonaOutput, echo_words=8)
    assert result.value.persona == own
    copies = "persona: copies 9 words of the instructions with a word or two changed"
    reasked_once(result, model, copies, "One sentence saying who your current team is and how")


@pytest.mark.parametrize(
    ("text", "copied"),
    [
        ("one sentence saying who your new team is and how they argue", (9, 0, 10)),
        ("saying who your team was and how it argues", (8, 0, 9)),  # one word changed
        ("one sentence saying who your team is, then a plan of our own", None),  # 7 words, then its own
        ("who is the team and how does it argue", None),  # the words, not their order
        ("one sentence saying who your X Y Z team is and how it argues", None),  # three in a row
        ("one sentence telling who your side is and how it argues", None),  # 4 unmatched to 9 matched
    ],
)
def test_an_altered_copy_is_n_minus_one_words_in_order_one_unmatched_in_three(text, copied):
    piece = " ".join(words("persona: one sentence saying who your team is and how it argues"))
    assert altered_run(piece, words(text), 8) == copied
