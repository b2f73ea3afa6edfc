"""``scripted:`` — a deterministic, dependency-free chat model for tests and
benchmarks. It writes schema-valid JSON for any schema it is handed, and can
be told to be slow, to reject drafts, to emit malformed JSON, and to raise
transient provider errors. Everything is seeded, so two runs with the same
config produce byte-identical arguments.

What a reply says depends only on the call's position (round, seat, role,
iteration) and seed; a seat's ``side`` tag (for / against) picks the words it
argues with, and a judge's SYNTHESIZE / CONTINUE follows ``synthesize_rate``,
a fact-checker's fail verdict ``factcheck_fail_rate``, a verdict's winner
``judge_winner``. A grounded arguer's search step searches until its prompt
shows passages, with a query drawn from the claim; its citations quote real
spans of the passages in its prompt, and ``bad_citation_rate`` of them cite
an id no passage has or words the passage lacks. A spec whose name holds
``summarize`` (``scripted:summarize``) asks the summarize tool first. A
grounded fact-checker takes its claims from the speech it is shown (six
words each) and rules on the first passage its prompt shows that holds a
denial word (contradicted; ``_DENIALS``), else on the first passage
(supported), or finds nothing (not found); it quotes the passage's first
words, and ``bad_citation_rate`` of its rulings cite an unknown id or words
the passage lacks. So a fixture collection decides which side is struck.

Temperature and gradual drift restyle the words, never the choices. 0.7
(``llm.temperature``'s default) is the reference temperature: there a reply
is exactly what it was before temperature mattered. Away from it the effects
grow with the distance: below 0.7 a register draws from fewer of its bank's
words (at 0 from one); above it a register word may become a wider-bank
synonym or an off-register stray, and a field's length wanders (a 12-word
field only grows, so replies stay over the schemas' minimum lengths). A
persona with ``persona_drift_rate`` r argues in round n with a share
min(1, r * (n - 1)) of its register words taken from the switched register
(the one a planted ``persona_switch_round`` switches to at once), and its
persona text moves through graded styles toward the switched one, evolving
when the grade changes. All of this draws from a stream of its own (seeded
like the content), so the content stream's draws are the same at every
temperature and rate, and at 0.7 with no drift nothing is drawn from it.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from collections import OrderedDict
from typing import Any

from harness.models.base import Completion, ModelRequest, ProviderError

_WORDS = {
    "for": [
        "benefit",
        "gain",
        "progress",
        "freedom",
        "growth",
        "opportunity",
        "efficiency",
        "trust",
        "evidence",
    ],
    "against": ["risk", "cost", "harm", "burden", "loss", "inequality", "failure", "doubt", "danger"],
    None: ["point", "claim", "reason", "question", "issue", "matter", "case", "view"],
}
# After a planted persona switch, every team argues in this register, so
# text signals (lexicon, embedding) can see the switch, not only the persona.
_SWITCHED = ["absurd", "ridiculous", "nonsense", "furious", "never", "always", "stupid", "outrage", "mock"]
# Wider banks (synonyms a hotter model reaches for) and stray, off-register words.
_WIDE = {
    "for": ["advance", "upside", "liberty", "prosperity", "promise", "merit"],
    "against": ["hazard", "downside", "damage", "strain", "setback", "peril"],
    None: ["notion", "premise", "aspect", "thread", "angle", "facet"],
    "switched": ["preposterous", "insane", "idiotic", "livid", "pathetic", "joke"],
}
_STRAY = ["banana", "weather", "guitar", "moonlight", "pancake", "holiday", "velvet", "bicycle"]
# A drifting persona's styles, from the reference one to the switched one.
_PERSONA_STYLES = [
    "a calm analyst who weighs",
    "a blunt analyst who questions",
    "an impatient critic who scolds",
    "a furious contrarian who mocks",
]
REFERENCE_TEMPERATURE = 0.7
_WIDEN = 0.6  # chance a register word takes a wider-bank synonym, per degree over the reference
_OFF_REGISTER = 0.3  # chance it strays off register, per degree over the reference
_LENGTH_SD = 0.5  # sd of a field's log length factor, per degree over the reference
_MIN_WORDS = 12  # the shortest field's length: lengths never go below it
_FILLER = [
    "because",
    "therefore",
    "clearly",
    "however",
    "studies",
    "show",
    "that",
    "the",
    "data",
    "suggests",
    "we",
]
# Fields whose text is private to a team; each carries a canary marker so
# isolation tests can prove it never reaches the other team.
_PRIVATE_FIELDS = {"scratchpad", "rationale", "persona", "critique_feedback", "notes"}
# Fields written long (a statement to publish), the rest a short clause.
_LONG_FIELDS = {"argument", "statement", "summary", "convergences", "tensions", "recommendation"}
# A passage as a grounded arguer's prompt shows it: [id] (source) text
_PASSAGE = re.compile(r"^\[(\S+)\] \([^)]*\) (.+)$", re.MULTILINE)
_CLAIM = re.compile(r"^Claim: (.+)$", re.MULTILINE)
# A grounded fact-check's prompts: the speech whose claims it names, and a ruling's fields.
_SPEECH = re.compile(r"^Speech to check \([^)]*\):\n(.+)$", re.MULTILINE)
_RULING_FIELDS = ("ruling", "passage", "quote")
_DENIALS = frozenset({"false", "untrue", "wrong"})  # a passage holding one contradicts the claim
_CLAIM_WORDS = 6
# The tags that place a call; others (such as ``side``) inform the reply but
# do not reseed it.
_POSITION_TAGS = ("attempt", "iteration", "role", "round", "team")
_REMEMBERED_REQUESTS = 4096


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def drift_share(rate: float, round_: int) -> float:
    """The share of register words a drifting persona takes from the switched register."""
    return min(1.0, rate * max(0, round_ - 1))


def _grade(share: float) -> int:
    """The persona style (an index into ``_PERSONA_STYLES``) at a drift share."""
    return min(len(_PERSONA_STYLES) - 1, int(share * len(_PERSONA_STYLES)))


class _Style:
    """How one reply departs from the reference register: its temperature and
    drift share, drawing only from its own stream (see module docstring)."""

    def __init__(self, temperature: float, drift: float, rng: random.Random) -> None:
        self.heat = temperature - REFERENCE_TEMPERATURE
        self.temperature = temperature
        self.drift = drift
        self.rng = rng

    @property
    def plain(self) -> bool:
        return self.heat == 0 and self.drift == 0

    def width(self, bank: list[str]) -> int:
        """How many of a bank's words are in use: fewer below the reference."""
        if self.heat >= 0:
            return len(bank)
        return max(1, math.ceil(len(bank) * self.temperature / REFERENCE_TEMPERATURE))

    def word(self, word: str, bank: list[str]) -> str:
        return bank[bank.index(word) % self.width(bank)] if word in bank else word

    def words(self, out: list[str], register: str | None, bank: list[str]) -> list[str]:
        """``out`` (register words at positions not divisible by 3) restyled."""
        rng, n = self.rng, len(out)
        if self.heat > 0:  # the length wanders; new words come from this stream
            factor = math.exp(rng.gauss(0.0, _LENGTH_SD * self.heat))
            n = max(min(n, _MIN_WORDS), min(2 * n, round(n * factor)))
            out = out[:n] + [rng.choice(bank if i % 3 else _FILLER) for i in range(len(out), n)]
        restyled = []
        for i, word in enumerate(out):
            if i % 3 == 0:
                restyled.append(word)
                continue
            # the same four draws per word whatever the settings, so a higher rate
            # switches a superset of the words a lower one does
            u_wide, u_off, u_drift, pick = rng.random(), rng.random(), rng.random(), rng.random()
            word = self.word(word, bank)
            if u_wide < _WIDEN * self.heat:
                word = _WIDE[register][int(pick * len(_WIDE[register]))]
            if u_off < _OFF_REGISTER * self.heat:
                word = _STRAY[int(pick * len(_STRAY))]
            if u_drift < self.drift:
                word = _SWITCHED[int(pick * self.width(_SWITCHED))]
            restyled.append(word)
        return restyled


class ScriptedModel:
    """Deterministic fake model; see module docstring. Settings are per instance."""

    def __init__(
        self,
        spec: str = "scripted:default",
        *,
        latency_s: float = 0.0,
        reject_first: int = 0,
        malformed_rate: float = 0.0,
        error_rate: float = 0.0,
        seed: int = 0,
        persona_switch_round: int | None = None,
        persona_drift_rate: float = 0.0,
        synthesize_rate: float = 0.5,
        factcheck_fail_rate: float = 0.2,
        judge_winner: str = "random",
        bad_citation_rate: float = 0.0,
    ) -> None:
        self.spec = spec
        self.latency_s = latency_s
        self.reject_first = reject_first
        self.malformed_rate = malformed_rate
        self.error_rate = error_rate
        self.seed = seed
        self.persona_switch_round = persona_switch_round
        self.persona_drift_rate = persona_drift_rate
        self.synthesize_rate = synthesize_rate
        self.factcheck_fail_rate = factcheck_fail_rate
        self.judge_winner = judge_winner
        self.bad_citation_rate = bad_citation_rate
        self.summarizes = "summarize" in spec.partition(":")[2]  # its arguer asks for a summary first
        # per-request retry counter, least recently asked dropped first: retries of
        # one request come back to back, and a 10,000-round run stays flat in memory
        self._calls: OrderedDict[str, int] = OrderedDict()

    def model_files(self) -> dict[str, str]:
        return {}

    def complete(self, request: ModelRequest) -> Completion:
        started = time.perf_counter()
        if self.latency_s:
            time.sleep(self.latency_s)
        tags = request.tags
        place = {k: tags[k] for k in _POSITION_TAGS if k in tags}
        key = json.dumps([place, request.seed], sort_keys=True, default=str)
        self._calls[key] = self._calls.pop(key, 0) + 1
        if len(self._calls) > _REMEMBERED_REQUESTS:
            self._calls.popitem(last=False)
        # Faults draw from their own stream (varying per retry); content depends
        # on the request alone, so injected errors never change what is argued.
        faults = _rng(self.seed, request.seed, key, self._calls[key], "faults")
        rng = _rng(self.seed, request.seed, key)
        drift = drift_share(self.persona_drift_rate, int(tags.get("round", 0)))
        style = _Style(request.temperature, drift, _rng(self.seed, request.seed, key, "style"))
        if self.error_rate and faults.random() < self.error_rate:
            raise ProviderError("scripted: injected transient provider error", status_code=503)
        if request.schema is None:
            text = self._sentence(rng, tags.get("side"), 24, style=style)
        elif self.malformed_rate and faults.random() < self.malformed_rate:
            text = '{"' + self._sentence(rng, None, 6) + '": tru'  # cut-off, unquoted
        else:
            prompt = request.messages[-1]["content"] if request.messages else ""
            tags = {**tags, "prompt": prompt, "style": style}
            text = json.dumps(self._fill(request.schema, request.schema, rng, tags))
        prompt_words = sum(len(m["content"].split()) for m in request.messages)
        return Completion(
            text=text,
            input_tokens=prompt_words,
            output_tokens=len(text.split()),
            latency_s=time.perf_counter() - started,
        )

    # -- content ---------------------------------------------------------------
    def _sentence(
        self,
        rng: random.Random,
        side: str | None,
        n: int,
        switched: bool = False,
        style: _Style | None = None,
    ) -> str:
        register = "switched" if switched else (side if side in _WORDS else None)
        words = _SWITCHED if switched else _WORDS[register]
        out = [rng.choice(words if i % 3 else _FILLER) for i in range(n)]
        if style is not None and not style.plain:
            out = style.words(out, register, words)
        return " ".join(out)

    def _switched(self, round_: int) -> bool:
        return self.persona_switch_round is not None and round_ >= self.persona_switch_round

    def _persona_grade(self, round_: int) -> int:
        if self._switched(round_):
            return len(_PERSONA_STYLES) - 1
        return _grade(drift_share(self.persona_drift_rate, round_))

    def _string(self, name: str, rng: random.Random, tags: dict[str, Any]) -> str:
        team, side = tags.get("team"), tags.get("side")
        round_ = tags.get("round", 0)
        style: _Style | None = tags.get("style")
        if name == "persona":
            bank = _WORDS.get(side, _WORDS[None])
            word = rng.choice(bank)
            word = style.word(word, bank) if style is not None else word
            text = f"We are {_PERSONA_STYLES[self._persona_grade(round_)]} every {word}."
        else:
            n = 12 if name not in _LONG_FIELDS else 30
            text = self._sentence(rng, side, n, self._switched(round_), style)
        if name in _PRIVATE_FIELDS and team:
            text += f" [canary:{team}:{name}:{round_}.{tags.get('iteration', 0)}]"
        return text

    def _fill(
        self, node: dict[str, Any], root: dict[str, Any], rng: random.Random, tags: dict[str, Any]
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, prop in node.get("properties", {}).items():
            out[name] = self._value(name, prop, root, rng, tags)
        return out

    def _value(
        self,
        name: str,
        prop: dict[str, Any],
        root: dict[str, Any],
        rng: random.Random,
        tags: dict[str, Any],
    ) -> Any:
        if "$ref" in prop:
            prop = root["$defs"][prop["$ref"].rsplit("/", 1)[-1]]
        if "anyOf" in prop:  # Optional[...]: scripted replies leave it out
            return None
        if name == "citations":
            return self._citations(str(tags.get("prompt", "")), rng)
        if name == "claims" and (speech := _SPEECH.search(str(tags.get("prompt", "")))):
            words = speech.group(1).split()
            chunks = [words[i : i + _CLAIM_WORDS] for i in range(0, len(words), _CLAIM_WORDS)]
            return [" ".join(c) for c in chunks if len(c) > 1][: prop.get("maxItems", 2)]
        if name in _RULING_FIELDS:
            return self._ruling(str(tags.get("prompt", "")))[name]
        if name == "query":
            return self._query(str(tags.get("prompt", "")), rng, tags.get("side"))
        if "enum" in prop:
            return self._choice(name, prop["enum"], rng, tags)
        kind = prop.get("type")
        if kind == "boolean":
            if name in ("is_approved", "approved"):
                return int(tags.get("iteration", 0)) >= self.reject_first
            return True
        if kind == "integer":
            return rng.randint(prop.get("minimum", 1), prop.get("maximum", 10))
        if kind == "number":
            return round(rng.uniform(prop.get("minimum", 0), prop.get("maximum", 1)), 3)
        if kind == "array":
            n = prop.get("minItems", 2)
            return [self._value(name, prop.get("items", {}), root, rng, tags) for _ in range(n)]
        if kind == "object":
            return self._fill(prop, root, rng, tags)
        text = self._string(name, rng, tags)
        limit = prop.get("maxLength")
        return text[:limit] if limit else text

    def _query(self, prompt: str, rng: random.Random, side: str | None) -> str:
        claim = _CLAIM.search(prompt)
        words = [w.strip(".,;:!?'\"") for w in (claim.group(1) if claim else "").split()]
        words = [w for w in words if len(w) > 3] or ["matter"]
        return " ".join(rng.sample(words, min(2, len(words))) + [rng.choice(_WORDS.get(side, _WORDS[None]))])

    def _citations(self, prompt: str, rng: random.Random) -> list[dict[str, str]]:
        """Up to two citations of the passages in the prompt, each quoting a real span,
        or (at ``bad_citation_rate``) an unknown id or words the passage lacks."""
        passages = _PASSAGE.findall(prompt)
        cited = []
        for pid, text in rng.sample(passages, min(2, len(passages))):
            words = text.rstrip("…").split()[:30]
            start = rng.randrange(max(1, len(words) - 4))
            quote = " ".join(words[start : start + rng.randint(3, 6)]) or text[:20]
            if self.bad_citation_rate and rng.random() < self.bad_citation_rate:
                if rng.random() < 0.5:
                    pid = f"no-such-passage.{rng.randrange(1000)}"
                else:
                    quote = " ".join(rng.choice(_SWITCHED) for _ in range(4))
            cited.append({"id": pid[:40], "quote": quote[:120]})
        return cited

    def _ruling(self, prompt: str) -> dict[str, str]:
        """A fact-check's ruling on its prompt's passages (see module docstring); no draw from ``rng``."""
        passages = _PASSAGE.findall(prompt)
        if not passages:
            return {"ruling": "not_found", "passage": "", "quote": ""}
        denied = [
            (pid, text) for pid, text in passages if _DENIALS & set(re.findall(r"[a-z]+", text.lower()))
        ]
        pid, text = (denied or passages)[0]
        quote = " ".join(text.rstrip("…").split()[:_CLAIM_WORDS])
        forge = _rng(self.seed, prompt, "forge")
        if self.bad_citation_rate and forge.random() < self.bad_citation_rate:
            if forge.random() < 0.5:
                pid = f"no-such-passage.{forge.randrange(1000)}"
            else:
                quote = " ".join(_SWITCHED[:4])
        return {
            "ruling": "contradicted" if denied else "supported",
            "passage": pid[:40],
            "quote": quote[:160],
        }

    def _choice(self, name: str, options: list[Any], rng: random.Random, tags: dict[str, Any]) -> Any:
        if name == "decision" and "evolve" in options:  # evolve when the persona's style changes
            round_ = int(tags.get("round", 0))
            planted = round_ == self.persona_switch_round
            graded = round_ > 1 and self._persona_grade(round_) != self._persona_grade(round_ - 1)
            return "evolve" if planted or graded else "keep"
        if name == "decision" and "SYNTHESIZE" in options:
            return "SYNTHESIZE" if rng.random() < self.synthesize_rate else "CONTINUE"
        if name == "verdict" and "fail" in options:
            return "fail" if rng.random() < self.factcheck_fail_rate else "pass"
        if name == "winner" and self.judge_winner in options:
            return self.judge_winner
        if name == "action" and "search" in options:  # a grounded arguer: search until it has passages
            prompt = str(tags.get("prompt", ""))
            if self.summarizes and "summarize" in options and 'Summary "' not in prompt:
                return "write" if _PASSAGE.search(prompt) else "summarize"
            return "write" if _PASSAGE.search(prompt) else "search"
        return rng.choice(options)
