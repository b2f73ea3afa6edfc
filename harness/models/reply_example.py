"""A worked example reply for a JSON schema: what a base model is shown before it answers.

A base model continues documents; it learns a reply's shape from one filled-in
example far better than from an instruction. The example is derived from the
request's schema (the fitted one the grammar decodes under): every field, its
``Literal`` values, its lengths and item counts. Text comes from a few values
written per field *name* about one example motion; a field without one gets
a neutral filler of a valid length, so every schema has an example. A reply
that copies the example's text is an echo (``harness.models.echo``), refused.
"""

from __future__ import annotations

from typing import Any

EXAMPLE_MOTION = "Cities should close their centres to private cars."

# Per field name, about EXAMPLE_MOTION. Never a field's description: a reply
# copying its label is refused (harness.models.echo), so the example must not show one.
_TEXT: dict[str, str] = {
    "argument": "Car-free centres cut air pollution where most people walk and work. "
    "Ghent closed its centre in 2017 and cycling rose by a third within two years. "
    "Shops kept their customers, who now arrive by tram and bicycle.",
    "answer": "A ban punishes people who cannot cycle or live far from a tram line. "
    "Deliveries and carers still need to reach the centre by road. "
    "Congestion charges cut traffic without shutting anyone out.",
    "speech": "A centre without private cars is quieter, cleaner and safer for children. "
    "Ghent showed that trade survives when buses and bicycles replace parking. "
    "The space freed from parking can hold trees, markets and housing.",
    "statement": "Closing centres to private cars works where public transport is strong. "
    "Small towns without frequent buses should start with a congestion charge.",
    "scratchpad": "The strongest objection is access for disabled people; exemptions for "
    "blue badges and deliveries answer it.",
    "notes": "Lead with Ghent's numbers, then answer the access objection.",
    "critique_feedback": "The argument names a real case and a concrete effect; it passes.",
    "revised_argument": "Car-free centres cut air pollution where people walk, as Ghent's "
    "rise in cycling after 2017 shows.",
    "reason": "Both sides now agree on exemptions, and only the cost question remains.",
    "tension": "Whether shops lose trade when parking disappears.",
    "justification": "Ghent's cycling figures are reported by the city and match the claim.",
    "evaluation": "Pro grounded its case in Ghent's figures; Con raised access but gave no numbers.",
    "synthesis": "Cities with frequent public transport should close their centres to private cars.",
    "persona": "Pragmatic urban planners who argue from measured outcomes in real cities.",
    "rationale": "The persona still fits: our arguments rest on evidence from real cities.",
    "query": "Ghent car-free centre cycling",
    "id": "p1",
    "quote": "cycling rose by a third",
    "passage": "p1",
    "topic": "Cities should close their centres to private cars.",
    "summary": "Pro cited Ghent's rise in cycling after its centre closed to cars. "
    "Con answered that a ban shuts out people who cannot cycle.",
    "convergences": "Both analysts agree that strong public transport must come before any ban.",
    "tensions": "They disagree on whether small shops lose trade when parking disappears.",
    "recommendation": "Pilot a car-free centre on weekends for a year and measure shop takings.",
    "for_strongest": "FOR was strongest on Ghent's measured rise in cycling.",
    "for_weakest": "FOR was weakest on access for people who cannot cycle.",
    "against_strongest": "AGAINST was strongest on deliveries and carers.",
    "against_weakest": "AGAINST was weakest in offering no figures for lost trade.",
    "reply": "Yes, a ban works where trams and buses are frequent.",
}
_LISTS: dict[str, list[str]] = {
    "claims": ["Ghent closed its centre to cars in 2017.", "Cycling in Ghent rose by a third."],
    "evidence": ["Ghent city traffic report, 2019"],
}
_CHOICES: dict[str, Any] = {"decision": "CONTINUE", "verdict": "pass", "is_approved": True}
_FILLER = "A short, concrete reply written for this example."


def example_reply(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON object that validates against ``schema`` (an object schema)."""
    return _object(schema, schema.get("$defs", {}))


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    return _resolve(defs[ref.rsplit("/", 1)[-1]], defs) if ref else node


def _object(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    return {name: _value(prop, name, defs) for name, prop in node.get("properties", {}).items()}


def _value(node: dict[str, Any], name: str, defs: dict[str, Any]) -> Any:
    node = _resolve(node, defs)
    if "anyOf" in node:  # an optional field: left empty, or a small model fills it with the example's text
        if any(_resolve(n, defs).get("type") == "null" for n in node["anyOf"]):
            return None
        return _value(node["anyOf"][0], name, defs)
    choices = node.get("enum") or ([node["const"]] if "const" in node else None)
    if choices:
        preferred = _CHOICES.get(name)
        return preferred if preferred in choices else choices[0]
    kind = node.get("type")
    if kind == "object":
        return _object(node, defs)
    if kind == "array":
        return _array(node, name, defs)
    if kind == "boolean":
        return bool(_CHOICES.get(name, True))
    if kind in ("integer", "number"):
        return node.get("minimum", 1)
    return _text(_TEXT.get(name, _FILLER), node)


def _array(node: dict[str, Any], name: str, defs: dict[str, Any]) -> list[Any]:
    items = node.get("items", {})
    least, most = node.get("minItems", 0), node.get("maxItems", 2)
    count = max(least, min(most, 2 if name in _LISTS else 1))
    if _resolve(items, defs).get("type", "string") == "string" and name in _LISTS:
        pool = _LISTS[name]
        return [_text(pool[i % len(pool)], _resolve(items, defs)) for i in range(count)]
    return [_value(items, name, defs) for _ in range(count)]


def _text(text: str, node: dict[str, Any]) -> str:
    """``text`` fitted to the field's lengths: cut at a word, or padded with filler."""
    least, most = node.get("minLength", 0), node.get("maxLength")
    while len(text) < least:
        text = f"{text} {_FILLER}"
    if most is not None and len(text) > most:
        cut = text[:most]
        text = cut.rsplit(" ", 1)[0] if " " in cut and len(cut.rsplit(" ", 1)[0]) >= least else cut
    return text
