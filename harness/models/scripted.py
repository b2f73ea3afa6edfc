"""``scripted:`` — a deterministic, dependency-free chat model for tests and
benchmarks. It writes schema-valid JSON for any schema it is handed, and can
be told to be slow, to reject drafts, to emit malformed JSON, and to raise
transient provider errors. Everything is seeded, so two runs with the same
config produce byte-identical arguments.

What a reply says depends only on the call's position (round, seat, role,
iteration) and seed; a seat's ``side`` tag (for / against) picks the words it
argues with. What a field means to a format (a judge's SYNTHESIZE at
``synthesize_rate``, a verdict's winner, a grounded arguer's citations of the
passages in its prompt) is the field script's: rules as data
(``harness.models.script``), the harness's own in
``harness.models.scripted_rules``, a plugin format's added with
``register_rules``. A field no rule writes gets a seeded value of its type:
an enum option, a number in range, 12 words as two sentences.

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
when the grade changes. A persona its prompt shows that is written in the
switched register (two or more of its words: a planted ``personas.<seat>``
can be, the model's own persona texts never are) switches its replies too,
so a switch planted in the prompt reaches the text as on any model. All of this draws from a stream of its own (seeded
like the content), so the content stream's draws are the same at every
temperature and rate, and at or below 0.7 with no drift nothing is drawn from it.
"""

from __future__ import annotations

import json
import random
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from harness.models.base import Completion, ModelRequest, ProviderError
from harness.models.script import PLUGIN_RULES, SKIP, FieldRule, ReplyField, Script
from harness.models.scripted_rules import BUILTIN_RULES, SETTINGS
from harness.models.scripted_style import (
    MIN_WORDS,
    PERSONA_STYLES,
    REFERENCE_TEMPERATURE,
    Style,
    drift_share,
    grade,
    seeded_rng,
    sentence,
    shows_switched_persona,
)

__all__ = ["REFERENCE_TEMPERATURE", "ScriptedModel", "drift_share"]

# The tags that place a call; others (such as ``side``) inform the reply but
# do not reseed it.
_POSITION_TAGS = ("attempt", "iteration", "role", "round", "team")
_REMEMBERED_REQUESTS = 4096
# A request's place as text (json.dumps(..., sort_keys=True, default=str)), with one encoder
_KEY = json.JSONEncoder(sort_keys=True, default=str)


class ScriptedModel:
    """Deterministic fake model; see module docstring. Settings are per instance:
    ``settings`` are the field script's (``scripted_rules.SETTINGS``: the
    ``model.synthesize_rate`` ... keys), ``script`` rules of this model's own,
    checked before any registered ones."""

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
        script: Sequence[FieldRule] = (),
        **settings: Any,
    ) -> None:
        if unknown := sorted(set(settings) - set(SETTINGS)):
            raise TypeError(f"ScriptedModel: unknown setting {unknown[0]!r}; known: {', '.join(SETTINGS)}")
        self.spec = spec
        self.latency_s = latency_s
        self.reject_first = reject_first
        self.malformed_rate = malformed_rate
        self.error_rate = error_rate
        self.seed = seed
        self.persona_switch_round = persona_switch_round
        self.persona_drift_rate = persona_drift_rate
        self.settings = {**SETTINGS, **settings}
        self.script = Script([*script, *PLUGIN_RULES, *BUILTIN_RULES], self.settings)
        # per-request retry counter, least recently asked dropped first: retries of
        # one request come back to back, and a 10,000-round run stays flat in memory
        self._calls: OrderedDict[str, int] = OrderedDict()

    def model_files(self) -> dict[str, str]:
        return {}

    @property
    def waits(self) -> bool:
        """Only its latency waits: at zero a call is this process's CPU alone (``ChatModel``)."""
        return self.latency_s > 0

    def complete(self, request: ModelRequest) -> Completion:
        started = time.perf_counter()
        if self.latency_s:
            time.sleep(self.latency_s)
        tags = request.tags
        place = {k: tags[k] for k in _POSITION_TAGS if k in tags}
        key = _KEY.encode([place, request.seed])
        self._calls[key] = self._calls.pop(key, 0) + 1
        if len(self._calls) > _REMEMBERED_REQUESTS:
            self._calls.popitem(last=False)
        # Faults draw from their own stream (varying per retry); content depends
        # on the request alone, so injected errors never change what is argued.
        # Seeded only for a model that injects any (a seeding is ~12 us a call).
        faulty = bool(self.error_rate or self.malformed_rate)
        faults = seeded_rng(self.seed, request.seed, key, self._calls[key], "faults") if faulty else None
        rng = seeded_rng(self.seed, request.seed, key)
        if shows_switched_persona(request.messages):
            tags = {**tags, "shown_switched": True}  # read by ReplyField.sentence
        drift = drift_share(self.persona_drift_rate, int(tags.get("round", 0)))
        style = Style(request.temperature, drift, self.seed, request.seed, key, "style")
        if faults is not None and self.error_rate and faults.random() < self.error_rate:
            raise ProviderError("scripted: injected transient provider error", status_code=503)
        if request.schema is None:
            text = sentence(rng, tags.get("side"), 24, "shown_switched" in tags, style=style)
        elif faults is not None and self.malformed_rate and faults.random() < self.malformed_rate:
            text = '{"' + sentence(rng, None, 6) + '": tru'  # cut-off, unquoted
        else:
            prompt = request.messages[-1]["content"] if request.messages else ""
            system = (
                request.messages[0]["content"]
                if request.messages[:1] and request.messages[0]["role"] == "system"
                else ""
            )
            tags = {**tags, "prompt": prompt, "system": system, "style": style}
            text = json.dumps(self._fill(request.schema, request.schema, rng, tags))
        prompt_words = sum(len(m["content"].split()) for m in request.messages)
        return Completion(
            text=text,
            input_tokens=prompt_words,
            output_tokens=len(text.split()),
            latency_s=time.perf_counter() - started,
        )

    # -- the persona's course, which rules read ------------------------------------
    def switched(self, round_: int) -> bool:
        """Whether a planted persona switch is due by ``round_``."""
        return self.persona_switch_round is not None and round_ >= self.persona_switch_round

    def persona_grade(self, round_: int) -> int:
        """The persona's style in ``round_``: an index into ``PERSONA_STYLES``."""
        if self.switched(round_):
            return len(PERSONA_STYLES) - 1
        return grade(drift_share(self.persona_drift_rate, round_))

    # -- content ---------------------------------------------------------------
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
        """The field script's value for a field, at each stage of its type, else a
        seeded one of that type."""
        if "$ref" in prop:
            prop = root["$defs"][prop["$ref"].rsplit("/", 1)[-1]]
        if "anyOf" in prop:  # Optional[...]: scripted replies leave it out
            return None
        field = ReplyField(name, prop, root, rng, tags, self)
        if (value := self.script.write("any", field)) is not SKIP:
            return value
        if "enum" in prop:
            value = self.script.write("enum", field)
            return rng.choice(prop["enum"]) if value is SKIP else value
        kind = prop.get("type")
        if kind == "boolean":
            value = self.script.write("boolean", field)
            return True if value is SKIP else value
        if kind == "integer":
            return rng.randint(prop.get("minimum", 1), prop.get("maximum", 10))
        if kind == "number":
            return round(rng.uniform(prop.get("minimum", 0), prop.get("maximum", 1)), 3)
        if kind == "array":
            n = prop.get("minItems", 2)
            return [self._value(name, prop.get("items", {}), root, rng, tags) for _ in range(n)]
        if kind == "object":
            return self._fill(prop, root, rng, tags)
        text = self.script.write("string", field)
        text = field.sentences(MIN_WORDS) if text is SKIP else text
        limit = prop.get("maxLength")
        return text[:limit] if limit and isinstance(text, str) else text
