"""The harness's own formats' field script (``harness.models.script``): what the
scripted model writes in the reply fields that mean something to a format.

- drift: a persona's text moves through graded styles as it drifts, and its
  decision is ``evolve`` when the style changes (or at a planted switch);
  a checkpoint interview's answer is the same words for the same seat,
  question and persona style, the style its prompt's persona shows
  (``interview``), and an
  interview judge finds two answers the same when they share half their words;
  the critic approves from iteration ``reject_first`` on; private notes carry
  canary markers; published statements are written long.
- panel: the judge says SYNTHESIZE at ``synthesize_rate``.
- moderated: the fact-checker fails a speech at ``factcheck_fail_rate``; a
  verdict names ``judge_winner`` (or a seeded side when ``random``).
- grounded: an arguer searches until its prompt shows passages (a spec whose
  name holds ``summarize`` asks the summarize tool first), with a query
  drawn from the claim; its citations quote real spans of the passages in
  its prompt, ``bad_citation_rate`` of them an id no passage has or words
  the passage lacks. A grounded fact-checker takes its claims from the
  speech it is shown (six words each) and rules on the first passage its
  prompt shows that holds a denial word (contradicted; ``DENIALS``), else on
  the first passage (supported), or finds nothing (not found); it quotes the
  passage's first words, and ``bad_citation_rate`` of its rulings cite an
  unknown id or words the passage lacks. So a fixture collection decides
  which side is struck.
"""

from __future__ import annotations

import re
from typing import Any

from harness.models.script import SKIP, Derived, FieldRule, Fixed, Rate, ReplyField, Scripted, Text, deriver
from harness.models.scripted_style import PERSONA_STYLES, SWITCHED, WORDS, Style, seeded_rng, sentence

# The model settings the rules read, with their defaults: each is a model.* key
# of ModelConfig (and conf/model/scripted.yaml), passed in by build_model.
SETTINGS: dict[str, Any] = {
    "synthesize_rate": 0.5,
    "factcheck_fail_rate": 0.2,
    "judge_winner": "random",
    "bad_citation_rate": 0.0,
}
# A passage as a grounded prompt shows it: [id] (source) text
PASSAGE = re.compile(r"^\[(\S+)\] \([^)]*\) (.+)$", re.MULTILINE)
_CLAIM = re.compile(r"^Claim: (.+)$", re.MULTILINE)
_QUESTION = re.compile(r"^Question: (.+)$", re.MULTILINE)  # an interview item's, as its prompt asks it
# A drift debater's persona, as its system prompt (harness.agents.thinking.debater_system) carries it.
_PERSONA = re.compile(r" Persona: (.+?)(?: Your team always| Reply with one JSON|$)")
_CANARY = re.compile(r"\[canary:[^\]]*\]")
# The two answers an interview judge compares (analysis.interviews.judge_messages).
_ANSWERS = (
    re.compile(r"^First answer: (.+)$", re.MULTILINE),
    re.compile(r"^Later answer: (.+)$", re.MULTILINE),
)
# A grounded fact-check's prompt: the speech whose claims it names.
_SPEECH = re.compile(r"^Speech to check \([^)]*\):\n(.+)$", re.MULTILINE)
RULING_FIELDS = ("ruling", "passage", "quote")
DENIALS = frozenset({"false", "untrue", "wrong"})  # a passage holding one contradicts the claim
_CLAIM_WORDS = 6

BUILTIN_RULES: tuple[FieldRule, ...] = (
    FieldRule("grounded.citations", ("citations",), Derived("citations")),
    FieldRule("grounded_check.claims", ("claims",), Derived("claims")),
    FieldRule("grounded_check.ruling", RULING_FIELDS, Derived("ruling")),
    FieldRule("grounded.query", ("query",), Derived("query")),
    FieldRule("drift.persona_decision", ("decision",), Derived("evolve"), on="enum", option="evolve"),
    FieldRule(
        "panel.judge_decision",
        ("decision",),
        Rate("SYNTHESIZE", "CONTINUE", setting="synthesize_rate"),
        on="enum",
        option="SYNTHESIZE",
    ),
    FieldRule(
        "moderated.fact_check",
        ("verdict",),
        Rate("fail", "pass", setting="factcheck_fail_rate"),
        on="enum",
        option="fail",
    ),
    FieldRule("judge.winner", ("winner",), Fixed(setting="judge_winner"), on="enum"),
    FieldRule("grounded.action", ("action",), Derived("action"), on="enum", option="search"),
    FieldRule("critic.approval", ("is_approved", "approved"), Derived("approval"), on="boolean"),
    FieldRule("drift.persona", ("persona",), Derived("persona"), on="string", canary=True),
    FieldRule("interview.answer", ("answer",), Derived("interview"), on="string", schema="InterviewOutput"),
    FieldRule("interview.judge", ("same",), Derived("same_answer"), on="boolean", schema="SameAnswer"),
    # text private to a team: canary-tagged
    FieldRule(
        "private_notes",
        ("scratchpad", "rationale", "critique_feedback", "notes"),
        Text(12),
        on="string",
        canary=True,
    ),
    # a statement to publish: long
    FieldRule(
        "published_statement",
        ("argument", "statement", "summary", "convergences", "tensions", "recommendation"),
        Text(30),
        on="string",
    ),
)


@deriver("approval")
def _approval(field: ReplyField) -> bool:
    return int(field.tags.get("iteration", 0)) >= field.model.reject_first


@deriver("persona")
def _persona(field: ReplyField) -> str:
    side, style = field.tags.get("side"), field.tags.get("style")
    bank = WORDS.get(side, WORDS[None])
    word = field.rng.choice(bank)
    word = style.word(word, bank) if isinstance(style, Style) else word
    grade = field.model.persona_grade(field.tags.get("round", 0))
    return f"We are {PERSONA_STYLES[grade]} every {word}."


@deriver("interview")
def _interview(field: ReplyField) -> str:
    """A seat's answer to an interview item: the same words whenever it is asked
    in the same persona style (drawn from the seat, the question and the style
    alone), so a planted switch, a drift or a replaced persona changes the
    answer and time alone does not."""
    round_, model = int(field.tags.get("round", 0)), field.model
    style, switched = interview_style(str(field.tags.get("system", "")), model, round_)
    question = _QUESTION.search(field.prompt)
    rng = seeded_rng(model.seed, field.tags.get("team"), question.group(1) if question else "", style)
    restyle = field.tags.get("style")
    switched = switched or "shown_switched" in field.tags  # a planted persona in the prompt, switched
    words = sentence(
        rng, field.tags.get("side"), 9, switched, restyle if isinstance(restyle, Style) else None
    )
    return f"As {style}, we say: {words}."


def interview_style(system: str, model: Scripted, round_: int) -> tuple[str, bool]:
    """The persona style an interview's system prompt shows, and whether it argues in
    the switched register: a scripted persona's graded style; another persona's own
    first words (a persona a fork put in); with none, the model's own course."""
    known = [i for i, style in enumerate(PERSONA_STYLES) if style in system]
    if known:
        return PERSONA_STYLES[known[-1]], known[-1] == len(PERSONA_STYLES) - 1 or model.switched(round_)
    if (persona := _PERSONA.search(system)) is not None:
        return " ".join(_CANARY.sub("", persona.group(1)).split()[:6]).rstrip(".,;:"), model.switched(round_)
    return PERSONA_STYLES[model.persona_grade(round_)], model.switched(round_)


@deriver("same_answer")
def _same_answer(field: ReplyField) -> bool:
    """An interview judge's verdict: the two answers share at least half their words."""
    first, later = (
        set(m.group(1).lower().split()) if (m := rx.search(field.prompt)) else set() for rx in _ANSWERS
    )
    return len(first & later) >= 0.5 * max(1, len(first | later))


@deriver("evolve")
def _evolve(field: ReplyField) -> str:
    """Evolve when the persona's style changes, or at a planted switch."""
    round_, model = int(field.tags.get("round", 0)), field.model
    planted = round_ == model.persona_switch_round
    graded = round_ > 1 and model.persona_grade(round_) != model.persona_grade(round_ - 1)
    return "evolve" if planted or graded else "keep"


@deriver("action")
def _action(field: ReplyField) -> str:
    """Search until the prompt shows passages (a summarizing spec summarizes first)."""
    prompt = field.prompt
    summarizes = "summarize" in field.model.spec.partition(":")[2]
    if summarizes and "summarize" in field.options and 'Summary "' not in prompt:
        return "write" if PASSAGE.search(prompt) else "summarize"
    return "write" if PASSAGE.search(prompt) else "search"


@deriver("query")
def _query(field: ReplyField) -> str:
    claim = _CLAIM.search(field.prompt)
    words = [w.strip(".,;:!?'\"") for w in (claim.group(1) if claim else "").split()]
    words = [w for w in words if len(w) > 3] or ["matter"]
    rng = field.rng
    return " ".join(
        rng.sample(words, min(2, len(words))) + [rng.choice(WORDS.get(field.tags.get("side"), WORDS[None]))]
    )


@deriver("citations")
def _citations(field: ReplyField) -> list[dict[str, str]]:
    """Up to two citations of the passages in the prompt, each quoting a real span,
    or (at ``bad_citation_rate``) an unknown id or words the passage lacks."""
    rng, bad = field.rng, field.setting("bad_citation_rate")
    passages = PASSAGE.findall(field.prompt)
    cited = []
    for pid, text in rng.sample(passages, min(2, len(passages))):
        words = text.rstrip("…").split()[:30]
        start = rng.randrange(max(1, len(words) - 4))
        quote = " ".join(words[start : start + rng.randint(3, 6)]) or text[:20]
        if bad and rng.random() < bad:
            if rng.random() < 0.5:
                pid = f"no-such-passage.{rng.randrange(1000)}"
            else:
                quote = " ".join(rng.choice(SWITCHED) for _ in range(4))
        cited.append({"id": pid[:40], "quote": quote[:120]})
    return cited


@deriver("claims")
def _claims(field: ReplyField) -> Any:
    """The speech's words in six-word claims; not a grounded check's prompt: SKIP."""
    speech = _SPEECH.search(field.prompt)
    if not speech:
        return SKIP
    words = speech.group(1).split()
    chunks = [words[i : i + _CLAIM_WORDS] for i in range(0, len(words), _CLAIM_WORDS)]
    return [" ".join(c) for c in chunks if len(c) > 1][: field.prop.get("maxItems", 2)]


@deriver("ruling")
def _ruling(field: ReplyField) -> str:
    return ruling(field.prompt, field.model.seed, field.setting("bad_citation_rate"))[field.name]


def ruling(prompt: str, seed: int, bad_rate: float) -> dict[str, str]:
    """A fact-check's ruling on its prompt's passages (see module docstring); its
    forgeries draw from a stream of their own, never the reply's."""
    passages = PASSAGE.findall(prompt)
    if not passages:
        return {"ruling": "not_found", "passage": "", "quote": ""}
    denied = [(pid, text) for pid, text in passages if DENIALS & set(re.findall(r"[a-z]+", text.lower()))]
    pid, text = (denied or passages)[0]
    quote = " ".join(text.rstrip("…").split()[:_CLAIM_WORDS])
    forge = seeded_rng(seed, prompt, "forge")
    if bad_rate and forge.random() < bad_rate:
        if forge.random() < 0.5:
            pid = f"no-such-passage.{forge.randrange(1000)}"
        else:
            quote = " ".join(SWITCHED[:4])
    return {
        "ruling": "contradicted" if denied else "supported",
        "passage": pid[:40],
        "quote": quote[:160],
    }
