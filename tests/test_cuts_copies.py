"""Issue 39: a reply a length cap cut ends at its last complete sentence, the
cut kept as a ``cut`` event; a published turn that repeats an earlier one is
a ``copy`` event, counted, and rejected by the critic only when asked."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, Field
from test_structured import Replies

from analysis.signals import copied
from harness.agents import CritiqueOutput
from harness.cli.progress import summary_line
from harness.models import build_model
from harness.models.base import Completion, ModelRequest
from harness.models.llama_sampling import grammar_text
from harness.models.sentences import PROSE_CHARS, last_sentence, sentence_grammar_schema, within
from harness.models.structured import end_at_sentences, generate_structured, request_schema
from harness.resume import resume_run
from harness.runtime.context import RunContext
from harness.runtime.interrupt import RunStopped
from harness.schema import ModelConfig
from harness.store.copies import find_copy, find_repeat, repeat_share, similarity
from harness.store.records import Published, parse_record

LIMIT = 120


class Turn(BaseModel):
    name: str = Field(min_length=1, max_length=20)
    text: str = Field(min_length=10, max_length=LIMIT)


def ask(*replies: str, max_tokens: int = 512):  # type: ignore[no-untyped-def]
    return ask_model(Replies(*replies), Turn, max_tokens)


def ask_model(model: Replies, schema: type[BaseModel], max_tokens: int = 512):  # type: ignore[no-untyped-def]
    return generate_structured(
        model.complete,
        [{"role": "user", "content": "speak"}],
        schema,
        temperature=0.5,
        max_tokens=max_tokens,
        seed=1,
        max_repairs=1,
        tags={"round": 1},
    )


def reply(text: str, name: str = "Ann") -> str:
    return json.dumps({"name": name, "text": text})


def test_last_sentence_keeps_closing_quotes_and_brackets():
    assert last_sentence('He said "go." Then he wa') == 'He said "go."'
    assert last_sentence("It works (mostly!) and then") == "It works (mostly!)"
    assert last_sentence("Version 3.5 is out and") == ""
    # a period after an article, a preposition or a conjunction is a cut's, not the writer's
    assert last_sentence("It is whole. It is supported by the .") == "It is whole."
    assert last_sentence("It is supported by the.") == ""
    assert last_sentence("Costs fall for workers and.") == ""


def test_a_string_at_its_max_length_ends_at_its_last_sentence():
    text = ("Cuts happen. The second sentence runs on and on " + "and on " * 20)[:LIMIT]
    result = ask(reply(text))
    assert result.value is not None and result.value.text == "Cuts happen."
    [cut] = result.cuts
    assert (cut.field, cut.cap, cut.dropped_chars) == ("text", "maxLength", LIMIT - len("Cuts happen."))


def test_a_reply_max_tokens_left_open_ends_at_its_last_sentence():
    result = ask('{"name": "Ann", "text": "One whole sentence here. Then a half')
    assert result.value is not None and result.value.text == "One whole sentence here."
    assert [(c.field, c.cap) for c in result.cuts] == [("text", "max_tokens")]


def test_a_natural_end_and_a_capped_name_are_not_cuts():
    whole = ("A sentence that ends. " * 10)[: LIMIT - 1] + "."
    result = ask(reply(whole[-LIMIT:], name="A" * 20))
    assert result.value is not None and result.cuts == []
    assert result.value.name == "A" * 20  # a name is not prose: no sentence asked of it


class Post(BaseModel):
    argument: str = Field(min_length=10, max_length=400)  # a field the formats publish


def test_a_local_models_grammar_closes_a_published_string_only_on_a_sentence_end():
    schema = request_schema(Post, 96)
    cap = schema["properties"]["argument"]["maxLength"]
    pattern = re.compile(sentence_grammar_schema(schema)["properties"]["argument"]["pattern"])
    assert pattern.match("Remote work saves time.")
    assert not pattern.match("Remote work saves time")  # SmolLM2's whole clause, closed unfinished
    assert not pattern.match("Remote work is supported by the .")
    # SmolLM2's critic's revision, begun mid-sentence; a turn with raw newlines, which no JSON string has
    assert not pattern.match(", and remote work saves time.")
    assert not pattern.match("Remote work saves time.\n\nNote: it does.")
    assert pattern.match("x" * cap) and not pattern.match("x" * (cap + 1))  # the cap still closes it
    assert "[.!?]" in grammar_text(schema)  # llama.cpp's converter took it: no plain-JSON fallback
    assert sentence_grammar_schema(request_schema(Turn, 96)) == request_schema(Turn, 96)  # not published


def test_a_cut_leaving_a_published_field_no_sentence_is_asked_again_for_shorter_sentences():
    model = Replies(
        json.dumps({"argument": "No sentence ends here " * 18}), json.dumps({"argument": "Short and whole."})
    )
    result = ask_model(model, Post, max_tokens=96)  # a cap of ~190 characters
    assert result.value is not None and result.value.argument == "Short and whole." and result.attempts == 2
    assert "argument: cut at its length limit, and no sentence ended before that" in result.errors[0]
    assert "shorter" in model.requests[1].messages[-1]["content"]  # the repair asks for it


def test_a_published_field_begun_mid_sentence_is_asked_again():
    model = Replies(
        json.dumps({"argument": ", and the evidence is plain."}), json.dumps({"argument": "It is plain."})
    )
    result = ask_model(model, Post)
    assert result.value is not None and result.value.argument == "It is plain." and result.attempts == 2
    assert result.errors[0].startswith("argument: begins mid-sentence (', and the evidence")
    # SmolLM2's moderated opening: a sentence's predicate, its subject left in the prompt
    fragment = "has been the topic of debate for years."
    model = Replies(
        json.dumps({"argument": fragment}), json.dumps({"argument": "It has been debated for years."})
    )
    result = ask_model(model, Post)
    assert result.attempts == 2 and result.errors[0].startswith("argument: begins mid-sentence ('has been")
    # a number begins a sentence as it is (so would a letter with no case)
    numbered = Replies(json.dumps({"argument": "2017 was the year Ghent closed its centre."}))
    assert ask_model(numbered, Post).attempts == 1


def test_a_cut_leaving_a_private_field_no_sentence_keeps_it_as_cut():
    cut = ("no sentence ends here " * 10)[:LIMIT]
    result = ask(reply(cut), reply("Short and whole."))
    assert result.value is not None and result.value.text == cut and result.attempts == 1
    assert [(c.field, c.dropped_chars, c.cap) for c in result.cuts] == [("text", 0, "maxLength")]


def test_an_optional_published_field_with_no_sentence_is_left_out_not_asked_again():
    # SmolLM2's critic at max_tokens=96: its revision cut at the cap with no sentence
    # ended, the whole verdict asked again for it (4 to 7 re-asks a benchmark run)
    cut = "The draft is too simplistic to make a message about whether it is the case that the"
    verdict = {"critique_feedback": "It names no cost.", "is_approved": False, "revised_argument": cut}
    model = Replies(json.dumps(verdict))
    result = ask_model(model, CritiqueOutput, max_tokens=96)
    assert result.value is not None and result.attempts == 1
    assert result.value.revised_argument is None and result.value.critique_feedback == "It names no cost."
    assert [(c.field, c.dropped_chars) for c in result.cuts] == [("revised_argument", len(cut))]


def test_a_published_field_left_mid_sentence_ends_at_its_last_sentence():
    unfinished = "Workers deserve a safe place. It is supported by the"
    result = ask_model(Replies(json.dumps({"argument": unfinished})), Post)
    assert result.value is not None and result.value.argument == "Workers deserve a safe place."
    assert [(c.field, c.cap, c.dropped_chars) for c in result.cuts] == [
        ("argument", "unfinished", len(unfinished) - len("Workers deserve a safe place."))
    ]
    # a field not published may stop where the model stopped it
    assert ask(reply("It is supported by the")).value.text == "It is supported by the"  # type: ignore[union-attr]
    # a published field with no sentence at all is invalid, and asked again
    retried = ask_model(
        Replies(json.dumps({"argument": "We should act now"}), json.dumps({"argument": "Act now."})), Post
    )
    assert retried.attempts == 2 and "argument: stops mid-sentence" in retried.errors[0]


def test_a_sentence_ending_on_a_contraction_is_unfinished():
    # SmolLM2's moderated Pro published this whole speech, and Con four such clauses
    speech = "This is a very well-known topic, with a lot of people opposing it, and it's."
    assert last_sentence(f"Cars pollute. {speech}") == "Cars pollute."
    assert last_sentence("It costs us. And they\u2019re.") == "It costs us."
    assert last_sentence("The idea is John's.") == "The idea is John's."  # a possessive ends one
    retried = ask_model(Replies(json.dumps({"argument": speech}), json.dumps({"argument": "Act now."})), Post)
    assert retried.attempts == 2 and "argument: stops mid-sentence" in retried.errors[0]


def test_a_judges_evaluation_left_mid_sentence_is_asked_again():
    # Gemma 3 270M's judge_refine judge: the evaluation is Pro's next message and the
    # transcript's Judge line, the synthesis the next motion
    from harness.agents.evaluator import EvaluationOutput

    motion = "Remote work serves workers, if offices stay open for those who need them."
    unfinished = "Con grounded its case in the Netherlands, and raised the issue of working from home"
    evaluated = "Pro named a cost. Con answered it."
    model = Replies(
        json.dumps({"evaluation": unfinished, "synthesis": motion}),
        json.dumps({"evaluation": f"{evaluated} Con then raised the", "synthesis": f"{motion} It is"}),
    )
    result = ask_model(model, EvaluationOutput)
    assert result.attempts == 2 and "evaluation: stops mid-sentence" in result.errors[0]
    assert result.value is not None and (result.value.evaluation, result.value.synthesis) == (
        evaluated,
        motion,
    )


def test_the_cap_is_the_schema_the_reply_was_decoded_under():
    fitted = request_schema(Turn, 66)  # a small budget: text's maxLength is cut to its share
    cap = fitted["properties"]["text"]["maxLength"]
    assert PROSE_CHARS <= cap < LIMIT
    value = Turn(name="Ann", text=("It all fits. " + "x" * LIMIT)[:cap])
    trimmed, cuts = end_at_sentences(value, fitted, reply(value.text))
    assert trimmed.text == "It all fits." and cuts[0].cap == "maxLength"


def test_similarity_is_the_share_of_a_texts_five_grams_in_the_earlier_one():
    earlier = "the safety of those employees working in the plant matters most"
    assert similarity(earlier, earlier) == 1.0
    assert similarity("nothing at all alike in these words here", earlier) == 0.0
    assert 0 < similarity(earlier + " and then five new words follow", earlier) < 1


def test_find_copy_names_the_turn_most_repeated():
    turns = [
        Published(id=f"r0001.{t}.argument.i0", round=1, team=t, role="argument", text=x)
        for t, x in (("pros", "one two three four five six"), ("cons", "alpha beta gamma delta epsilon"))
    ]
    copy = find_copy("alpha beta gamma delta epsilon", turns, 0.5)
    assert copy is not None and (copy.id, copy.seat, copy.round, copy.similarity) == (
        turns[1].id,
        "cons",
        1,
        1.0,
    )
    assert find_copy("something new entirely written here", turns, 0.5) is None


class Rewrite:
    """The scripted model with each reply's JSON rewritten by ``edit(request, data)``."""

    def __init__(self, inner: Any, edit: Callable[[ModelRequest, dict[str, Any]], None]) -> None:
        self.inner, self.edit, self.spec = inner, edit, inner.spec

    def complete(self, request: ModelRequest) -> Completion:
        done = self.inner.complete(request)
        data = json.loads(done.text)
        self.edit(request, data)
        return dataclasses.replace(done, text=json.dumps(data))

    def model_files(self) -> dict[str, str]:
        return {}


def rewriting(edit: Callable[[ModelRequest, dict[str, Any]], None]) -> Callable[[ModelConfig], Rewrite]:
    return lambda cfg: Rewrite(build_model(cfg), edit)


_RIVAL = re.compile(r"^Answer this opposing point: (.+)$", re.MULTILINE)


def cons_copies(request: ModelRequest, data: dict[str, Any]) -> None:
    """CONS's drafts are, word for word, the PROS turn its prompt answers."""
    rival = _RIVAL.search(request.messages[-1]["content"])
    if request.tags.get("role") == "thinking" and request.tags.get("team") == "cons" and rival:
        data["argument"] = rival.group(1)


LOOP = "Remote work saves every worker {} hours."


def pros_loops(request: ModelRequest, data: dict[str, Any]) -> None:
    """PROS's drafts write one sentence three times, as SmolLM2 looping to its cap does
    (a sentence of its round's: no turn copies another)."""
    if request.tags.get("role") == "thinking" and request.tags.get("team") == "pros":
        loop = LOOP.format(request.tags["round"])
        data["argument"] = f"{loop} {loop} {loop.lower()[:-1]}!"


def loops_and_copies(request: ModelRequest, data: dict[str, Any]) -> None:
    """PROS loops (``pros_loops``) and CONS copies the looping turn (``cons_copies``)."""
    pros_loops(request, data)
    cons_copies(request, data)


def events(run_dir: Any, name: str) -> list[Any]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(parse_record, lines) if getattr(e, "event", None) == name]


def test_a_copied_turn_is_a_copy_event_naming_it_and_counted(run):
    result = run("rounds=2", build=rewriting(cons_copies))
    copies = events(result.run_dir, "copy")
    assert [(e.id, e.data["copies"], e.data["seat"], e.data["round"]) for e in copies] == [
        ("r0001.cons.argument.i0.copy.0", "r0001.pros.argument.i0", "pros", 1),
        ("r0002.cons.argument.i0.copy.0", "r0002.pros.argument.i0", "pros", 2),
    ]
    assert [e.data["turn"] for e in copies] == ["r0001.cons.argument.i0", "r0002.cons.argument.i0"]
    assert all(e.data["similarity"] == 1.0 for e in copies)
    assert result.manifest.counts.copies == 2 and result.manifest.counts.by_event["copy"] == 2
    assert "copies 2" in summary_line(result.manifest, 2)


def test_a_repeat_is_a_sentence_the_turn_writes_again_by_its_words():
    text = "It is too high. It costs. It is too high. it is TOO high! Remote work helps people."
    found = find_repeat(text)
    assert found is not None and (found.sentence, found.times, found.share) == ("It is too high.", 3, 0.5)
    assert repeat_share(text) == 0.5  # 2 of its 4 sentences of 3 words or more ("It costs." is not one)
    assert find_repeat("Yes. Yes. Remote work helps people.") is None  # too short to count
    assert find_repeat("It is too high. It is too low.") is None and repeat_share("") == 0.0


def test_a_turn_repeating_itself_is_a_repeat_event_and_counted(run):
    result = run("rounds=2", build=rewriting(pros_loops))
    repeats = events(result.run_dir, "repeat")
    assert [(e.data["turn"], e.data["sentence"], e.data["times"], e.data["share"]) for e in repeats] == [
        (f"r000{r}.pros.argument.i0", LOOP.format(r), 3, 0.667) for r in (1, 2)
    ]  # round 1's too: a repeat needs no earlier turn
    assert result.manifest.counts.repeats == 2 and result.manifest.counts.by_event["repeat"] == 2
    assert "repeats 2" in summary_line(result.manifest, 2)


def test_reject_copies_has_the_critic_reject_a_copy_naming_it(run):
    result = run(
        "rounds=1", "critic.reject_copies=true", "critic.on_loop_lock=skip_turn", build=rewriting(cons_copies)
    )
    critiques = [
        parse_record(x) for x in (result.run_dir / "cons" / "critique.jsonl").read_text().splitlines()
    ]
    assert critiques and all(not c.is_approved for c in critiques)  # type: ignore[union-attr]
    assert all("r0001.pros.argument.i0" in c.feedback for c in critiques)  # type: ignore[union-attr]
    assert result.manifest.counts.rejections == len(critiques) and result.manifest.counts.copies == 0


def pros_overflows(request: ModelRequest, data: dict[str, Any]) -> None:
    """PROS's argument fills its decoding cap, its last sentence left unfinished."""
    if request.tags.get("role") == "thinking" and request.tags.get("team") == "pros":
        cap = request.schema["properties"]["argument"]["maxLength"]  # type: ignore[index]
        data["argument"] = ("Workers deserve a safe place to work. " * 20 + "and the safety of those")[:cap]


def test_a_cut_turn_is_published_whole_sentences_and_the_cut_is_an_event(run):
    result = run("rounds=1", build=rewriting(pros_overflows))
    turns = [parse_record(x) for x in (result.run_dir / "shared_memory.jsonl").read_text().splitlines()]
    pros = next(t for t in turns if t.team == "pros")
    assert pros.text.endswith("to work.")  # type: ignore[union-attr]
    [cut] = [e for e in events(result.run_dir, "cut") if e.team == "pros" and e.role == "thinking"]
    assert (
        cut.data["field"] == "argument" and cut.data["cap"] == "maxLength" and cut.data["dropped_chars"] > 0
    )
    assert result.manifest.counts.cuts >= 1


def test_a_tight_budget_cuts_the_scripted_replies_to_whole_sentences_and_loses_none(run):
    """At llm.max_tokens=96 (the Makefile's study, pilot and long runs) every capped
    scripted field keeps a whole sentence: cuts, and no reply lost to them."""
    result = run("rounds=2", "llm.max_tokens=96")
    turns = [parse_record(x) for x in (result.run_dir / "shared_memory.jsonl").read_text().splitlines()]
    assert len(turns) == 4 and all(last_sentence(t.text) == t.text for t in turns)  # type: ignore[union-attr]
    assert result.manifest.counts.schema_failures == 0 and result.manifest.counts.cuts > 0


def test_a_grounded_turn_over_its_limit_ends_at_its_last_sentence():
    assert within("It holds. Then a clause that runs past", 20) == ("It holds.", True)
    assert within("no sentence ends in these words at all", 20) == ("no sentence ends…", True)


def test_the_analysis_reads_each_turns_copy_share():
    texts = ["a b c d e f", "x y", "a b c d e f", "a b c d e f and more"]
    assert copied(texts) == [0.0, 0.0, 1.0, 0.5]  # the last: 2 of its 4 five-grams are earlier


@pytest.mark.parametrize("landed", [False, True], ids=["event-lost", "event-landed"])
def test_a_resume_writes_a_copy_event_a_kill_lost_and_none_twice(run, monkeypatch, landed):
    """Killed between the CONS turn of round 2 landing and its copy event (or just
    after the event): the resume checks the landed turn again, and writes the event once."""
    check = RunContext._check_copy

    def killed(self: RunContext, turn: Published, earlier: list[Published] | None = None) -> None:
        if landed:
            check(self, turn, earlier)
        if turn.id == "r0002.cons.argument.i0" and earlier is None:  # as appended, not rechecked
            raise RunStopped("killed after the turn landed")
        check(self, turn, earlier)

    monkeypatch.setattr(RunContext, "_check_copy", killed)
    first = run("rounds=2", build=rewriting(loops_and_copies))
    assert first.manifest.status == "interrupted"
    assert len(events(first.run_dir, "copy")) == 1 + landed
    assert len(events(first.run_dir, "repeat")) == 3  # the killed turn's repeat is checked after its copy
    monkeypatch.undo()
    again = resume_run(first.run_dir, build=rewriting(loops_and_copies))
    assert again.manifest.status == "completed"
    assert [e.data["turn"] for e in events(again.run_dir, "copy")] == [
        "r0001.cons.argument.i0",
        "r0002.cons.argument.i0",
    ]
    assert [e.data["turn"] for e in events(again.run_dir, "repeat")] == [
        f"r000{r}.{seat}.argument.i0" for r in (1, 2) for seat in ("pros", "cons")
    ]
    assert (again.manifest.counts.copies, again.manifest.counts.repeats) == (2, 4)
