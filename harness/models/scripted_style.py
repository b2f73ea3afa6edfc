"""The scripted model's words and how temperature and drift restyle them
(see ``harness.models.scripted``): the registers a seat argues in, the wider
and stray banks a hotter model reaches for, the persona styles a drifting
persona moves through, and ``Style``, which draws only from its own stream."""

from __future__ import annotations

import hashlib
import math
import random
import re

WORDS = {
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
SWITCHED = ["absurd", "ridiculous", "nonsense", "furious", "never", "always", "stupid", "outrage", "mock"]
# Wider banks (synonyms a hotter model reaches for) and stray, off-register words.
WIDE = {
    "for": ["advance", "upside", "liberty", "prosperity", "promise", "merit"],
    "against": ["hazard", "downside", "damage", "strain", "setback", "peril"],
    None: ["notion", "premise", "aspect", "thread", "angle", "facet"],
    "switched": ["preposterous", "insane", "idiotic", "livid", "pathetic", "joke"],
}
STRAY = ["banana", "weather", "guitar", "moonlight", "pancake", "holiday", "velvet", "bicycle"]
# A drifting persona's styles, from the reference one to the switched one.
PERSONA_STYLES = [
    "a calm analyst who weighs",
    "a blunt analyst who questions",
    "an impatient critic who scolds",
    "a furious contrarian who mocks",
]
REFERENCE_TEMPERATURE = 0.7
_WIDEN = 0.6  # chance a register word takes a wider-bank synonym, per degree over the reference
_OFF_REGISTER = 0.3  # chance it strays off register, per degree over the reference
_LENGTH_SD = 0.5  # sd of a field's log length factor, per degree over the reference
MIN_WORDS = 12  # the shortest field's length: lengths never go below it
# The longest sentence of a text field: a reply cut at a tight budget (96 tokens
# leave a drift argument ~113 characters) still keeps one whole sentence.
SENTENCE_WORDS = 8
FILLER = [
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


# The persona a debater's prompt shows (harness.agents.thinking.debater_system).
_SHOWN_PERSONA = re.compile(r"Persona: (.+)")
# A shown persona holding this many switched-register words argues in that register:
# a planted one can (personas.<seat>); the model's own persona texts hold at most one ("furious").
SWITCHED_PERSONA_WORDS = 2


# The switched register's words, but those an instruction uses too (probes).
_SWITCHED_BANK = frozenset({*SWITCHED, *WIDE["switched"]} - {"never", "always"})


def shows_switched_persona(messages: list[dict[str, str]]) -> bool:
    """Whether a message shows a persona written in the switched register."""
    for message in messages:
        for persona in _SHOWN_PERSONA.findall(message["content"]):
            if (
                sum(w in _SWITCHED_BANK for w in re.findall(r"[a-z]+", persona.lower()))
                >= SWITCHED_PERSONA_WORDS
            ):
                return True
    return False


def seeded_rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def drift_share(rate: float, round_: int) -> float:
    """The share of register words a drifting persona takes from the switched register."""
    return min(1.0, rate * max(0, round_ - 1))


def grade(share: float) -> int:
    """The persona style (an index into ``PERSONA_STYLES``) at a drift share."""
    return min(len(PERSONA_STYLES) - 1, int(share * len(PERSONA_STYLES)))


class Style:
    """How one reply departs from the reference register: its temperature and
    drift share, drawing only from its own stream (see module docstring)."""

    def __init__(self, temperature: float, drift: float, *seed: object) -> None:
        self.heat = temperature - REFERENCE_TEMPERATURE
        self.temperature = temperature
        self.drift = drift
        self._seed = seed  # the stream's (``seeded_rng``), seeded at its first draw
        self._rng: random.Random | None = None

    @property
    def rng(self) -> random.Random:
        if self._rng is None:
            self._rng = seeded_rng(*self._seed)
        return self._rng

    @property
    def plain(self) -> bool:
        return self.heat == 0 and self.drift == 0

    @property
    def drawn(self) -> bool:
        """Whether a draw of this stream can change a word: not at or below the
        reference temperature without drift, where a word is only narrowed."""
        return self.heat > 0 or self.drift > 0

    def width(self, bank: list[str]) -> int:
        """How many of a bank's words are in use: fewer below the reference."""
        if self.heat >= 0:
            return len(bank)
        return max(1, math.ceil(len(bank) * self.temperature / REFERENCE_TEMPERATURE))

    def word(self, word: str, bank: list[str]) -> str:
        return bank[bank.index(word) % self.width(bank)] if word in bank else word

    def words(self, out: list[str], register: str | None, bank: list[str]) -> list[str]:
        """``out`` (register words at positions not divisible by 3) restyled."""
        if not self.drawn:  # the four draws a word below would change nothing: none made
            return [word if i % 3 == 0 else self.word(word, bank) for i, word in enumerate(out)]
        rng, n = self.rng, len(out)
        if self.heat > 0:  # the length wanders; new words come from this stream
            factor = math.exp(rng.gauss(0.0, _LENGTH_SD * self.heat))
            n = max(min(n, MIN_WORDS), min(2 * n, round(n * factor)))
            out = out[:n] + [rng.choice(bank if i % 3 else FILLER) for i in range(len(out), n)]
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
                word = WIDE[register][int(pick * len(WIDE[register]))]
            if u_off < _OFF_REGISTER * self.heat:
                word = STRAY[int(pick * len(STRAY))]
            if u_drift < self.drift:
                word = SWITCHED[int(pick * self.width(SWITCHED))]
            restyled.append(word)
        return restyled


def sentence(
    rng: random.Random,
    side: str | None,
    n: int,
    switched: bool = False,
    style: Style | None = None,
) -> str:
    """``n`` words: register words of ``side`` (or of the switched register) between fillers."""
    register = "switched" if switched else (side if side in WORDS else None)
    words = SWITCHED if switched else WORDS[register]
    out = [rng.choice(words if i % 3 else FILLER) for i in range(n)]
    if style is not None and not style.plain:
        out = style.words(out, register, words)
    return " ".join(out)


def sentences(words: str) -> str:
    """``words`` as sentences of at most ``SENTENCE_WORDS`` words, of even length, each
    ending with a period, the first word capitalised (a published field may not begin
    in lower case: ``harness.models.sentences``): the words (and token counts) unchanged."""
    out = words.split()
    out[:1] = [w[:1].upper() + w[1:] for w in out[:1]]
    size = math.ceil(len(out) / max(1, math.ceil(len(out) / SENTENCE_WORDS)))
    return " ".join(w + "." if (i + 1) % size == 0 or i == len(out) - 1 else w for i, w in enumerate(out))
