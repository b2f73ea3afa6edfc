"""Debate formats: each module defines one ``Format`` object (see
``harness.formats.base``), and ``FORMATS`` maps a format's name to it.

``validate`` turns a composed config into a ``Config``: the schema's own
checks (``harness.schema``), then the chosen format's. ``harness.config.validate``
is this function, for callers that know only the config."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from harness.formats.base import Format, FormatOptions, RunLogs, Seat
from harness.formats.drift import DRIFT
from harness.formats.grounded import GROUNDED
from harness.formats.judge_refine import JUDGE_REFINE
from harness.formats.moderated import MODERATED
from harness.formats.panel import PANEL
from harness.formats.sections import structured_config, structured_options
from harness.plugins import format_entry_points
from harness.probes.catalog import check_specs
from harness.schema import CONTROL_TAKES, Config, ConfigError, RoleOverride, _require, keys_at

FORMATS: dict[str, Format] = {f.name: f for f in (DRIFT, PANEL, MODERATED, JUDGE_REFINE, GROUNDED)}


def register_format(fmt: Format) -> Format:
    """Make ``format.name=<fmt.name>`` run ``fmt``: the hook for a format
    defined outside this package (docs/adding-a-format.md). Registering the
    same object again does nothing; a different format under a taken name is
    a one-line ``ConfigError``."""
    known = FORMATS.get(fmt.name)
    if known is not None and known is not fmt:
        raise ConfigError(f"format {fmt.name!r}: a different format is already registered under that name")
    FORMATS[fmt.name] = fmt
    return fmt


def get_format(name: str) -> Format:
    """The format called ``name``, registered or installed as a plugin
    (``harness.plugins``); a one-line ``ConfigError`` if there is none."""
    if name not in FORMATS:
        load_plugin(name)
    if name not in FORMATS:
        known = sorted({*FORMATS, *(ep.name for ep in format_entry_points())})
        raise ConfigError(f"format.name: unknown format {name!r}; known: {', '.join(known)}")
    return FORMATS[name]


def load_plugin(name: str) -> None:
    """Register the installed format plugin called ``name``, if there is one."""
    for ep in format_entry_points():
        if ep.name != name:
            continue
        try:
            fmt = ep.load()
        except Exception as exc:  # noqa: BLE001 (any import error of the plugin: one line)
            raise ConfigError(f"format.name: plugin {name!r} ({ep.value}) does not load: {exc}") from exc
        if not isinstance(fmt, Format):
            raise ConfigError(
                f"format.name: plugin {name!r} ({ep.value}) is no Format but {type(fmt).__name__}"
            )
        register_format(fmt)


def validate(cfg: DictConfig | dict[str, Any]) -> Config:
    """Type-check and range-check a composed config; raise a one-line ConfigError."""
    return validated(cfg)[0]


def validated(cfg: DictConfig | dict[str, Any]) -> tuple[Config, Format]:
    """``validate``, with the format it looked up (a run needs it; looking it up again costs).

    The schema checks its own keys (``harness.schema``); the chosen format's
    options, roles, seats and reply budgets are checked here, above it."""
    obj = structured_config(cfg)  # the schema's merge, section by section, each section's kept
    raw_format = dict(obj.format or {})
    fmt = get_format(str(raw_format.get("name", "drift")))
    check_control(obj, fmt)  # before the options: a control's preset sets options only its format has
    check_option_keys(fmt, raw_format)
    obj.format = structured_options(fmt.options, raw_format, "format.")
    obj.format.check()
    obj.topic.load_files()
    check_personas(obj, fmt)  # seats first, then files read in, before the schema checks the text
    obj.interviews.load_file()
    obj.check()
    check_specs(obj.probes)
    obj.check_roles(fmt.model_roles(obj))
    check_chat(obj, fmt)
    _require(
        not obj.probes.enabled or fmt.probes,
        "probes.enabled",
        f"only format={' or '.join(names_with('probes'))} runs probes, not {fmt.name}",
    )
    _require(
        not obj.interviews.on or fmt.interview_view is not None,
        "interviews.rounds",
        f"only format={' or '.join(names_with('interview_view'))} interviews its seats, not {fmt.name}",
    )
    for role in fmt.model_roles(obj):
        check_context(obj, role)
    return obj, fmt


def names_with(flag: str) -> list[str]:
    """The registered formats whose ``Format.<flag>`` is true (for error messages)."""
    return sorted(name for name, fmt in FORMATS.items() if getattr(fmt, flag))


def check_control(cfg: Config, fmt: Format) -> None:
    """A control takes away a part of a format; on a format without that part it
    would run unchanged and the analysis would pair it as a control all the same."""
    if cfg.control in CONTROL_TAKES and cfg.control not in fmt.controls:
        runs = " or ".join(sorted(n for n, f in FORMATS.items() if cfg.control in f.controls))
        raise ConfigError(
            f"control={cfg.control}: format={fmt.name} has no {CONTROL_TAKES[cfg.control]} to take away "
            f"(experiment=control_{cfg.control} runs on format={runs or 'none'})"
        )


def unknown_option(fmt: Format, key: str) -> str | None:
    """The one line for ``format.<key>`` when the format has no such option (a
    key of another format's, a typo), naming the options it has; None if it has
    it (a mapping's keys are the options' own ``check`` to refuse)."""
    found = keys_at(fmt.options, key.removeprefix("format.").split("."))
    if found is None:
        return None
    depth, known = found
    parent = ".".join(key.split(".")[: depth + 1])
    where = "its options" if parent == "format" else f"{parent} holds"
    return f"{key}: not an option of format={fmt.name}; {where}: {', '.join(known)}"


def option_error(fmt: Format, key: str, value: Any) -> str | None:
    """The one line ``validate`` ends in for ``+format.<key>=<value>`` alone on
    ``fmt``'s defaults, so a command line Hydra refuses gets the same line; None if it takes it."""
    raw: dict[str, Any] = {"name": fmt.name}
    *parents, last = key.removeprefix("format.").split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    try:
        check_option_keys(fmt, raw)
        structured_options(fmt.options, raw, "format.").check()
    except ConfigError as exc:
        return str(exc)
    return None


def entry_error(fmt: Format, key: str, value: Any) -> str | None:
    """The one line ``validate`` ends in for ``+roles.<role>...`` or ``+personas.<seat>...``
    alone on ``fmt``'s defaults (``option_error``'s twin): Hydra refuses a role or seat
    the format's config does not declare with advice to add ``+``, which ``validate``
    then refuses in turn. None if it takes it (``roles.critic.kwargs.x``: ``+`` is the fix)."""
    *parents, last = key.split(".")
    raw: dict[str, Any] = {"format": {"name": fmt.name}, "model": {"spec": "scripted:default"}}
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    try:
        validated(raw)
    except ConfigError as exc:
        return str(exc)
    return None


def check_option_keys(fmt: Format, raw: dict[str, Any], prefix: str = "format") -> None:
    """Every key under ``format`` one the format has (``unknown_option``)."""
    for key, value in raw.items():
        if (line := unknown_option(fmt, f"{prefix}.{key}")) is not None:
            raise ConfigError(line)
        if isinstance(value, dict):
            check_option_keys(fmt, value, f"{prefix}.{key}")


def check_personas(cfg: Config, fmt: Format) -> None:
    """``personas.<seat>``: a seat of the format, which has a persona node, then each file read in."""
    planted = {seat: p for seat, p in cfg.personas.items() if p.planted}
    if not planted:
        return
    _require(
        fmt.personas and getattr(cfg.format, "persona", True),
        "personas",
        f"only format={' or '.join(names_with('personas'))} with format.persona=true plants a persona",
    )
    names = [s.name for s in fmt.seat_list(cfg)]
    for seat, persona in planted.items():
        _require(
            seat in names,
            f"personas.{seat}",
            f"no such seat in format {fmt.name!r}; its seats: {', '.join(names)}",
        )
        persona.load_file(f"personas.{seat}")


def check_chat(cfg: Config, fmt: Format) -> None:
    """``chat=<seat>`` gives that seat to a person; a human seat needs a format that has them."""
    seats, format_name = fmt.seat_list(cfg), fmt.name
    if cfg.chat is not None:
        names = [s.name for s in seats]
        # a seat by its name, or by the side it argues: chat=against is the drift format's cons
        seat = next((s for s in seats if cfg.chat in (s.name, s.side)), None)
        if seat is None:
            raise ConfigError(
                f"chat: no seat {cfg.chat!r} in format {format_name!r}; its seats: {', '.join(names)}"
            )
        role = seat.role
        cfg.roles[role] = RoleOverride(**{**vars(cfg.roles.get(role, RoleOverride())), "spec": "human:you"})
    humans = [s.role for s in seats if (cfg.role_model(s.role)[0].spec.startswith("human:"))]
    if humans and not fmt.human_seats:
        raise ConfigError(
            f"roles.{humans[0]}.spec: a person can play a seat only in format={' or '.join(names_with('human_seats'))}, "
            f"not {format_name}"
        )


PROMPT_ROOM = 256  # tokens a local model's context keeps for the prompt, at least


def max_tokens_key(cfg: Config, role: str) -> str:
    """The key that set ``role``'s reply budget: its own override, or the shared one."""
    own = cfg.roles.get(role, RoleOverride()).max_tokens is not None
    return f"roles.{role}.max_tokens" if own else "llm.max_tokens"


def check_context(cfg: Config, role: str) -> None:
    """A local model's reply budget must leave room for the prompt in its context."""
    model, _, max_tokens = cfg.role_model(role)
    if not model.spec.startswith("local:") or max_tokens <= model.n_ctx - PROMPT_ROOM:
        return
    raise ConfigError(
        f"{max_tokens_key(cfg, role)}: {max_tokens} tokens cannot fit {model.spec}'s context of {model.n_ctx} "
        f"with room for a prompt; use at most {model.n_ctx - PROMPT_ROOM} or raise model.n_ctx"
    )


__all__ = [
    "DRIFT",
    "FORMATS",
    "GROUNDED",
    "JUDGE_REFINE",
    "MODERATED",
    "PANEL",
    "Format",
    "FormatOptions",
    "RunLogs",
    "Seat",
    "check_chat",
    "check_context",
    "check_control",
    "max_tokens_key",
    "names_with",
    "get_format",
    "load_plugin",
    "register_format",
    "option_error",
    "entry_error",
    "unknown_option",
    "validate",
    "validated",
]
