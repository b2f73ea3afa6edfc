"""A run, as a report a person (md, txt) or a script (json) reads, or as
a transcript view; and a sweep's final syntheses. The entry point of
``python -m harness.export`` (``harness/export/__main__.py``, which parses the
command line and writes the file).

One module per role:

- ``shape``: the report's shape (the dataclasses ``--as json`` dumps);
- ``build``: a run folder as a report (``build_report``, ``ROUND_HOOKS``);
- ``render``: a report as md, txt or json (``RENDERERS``);
- ``views``: the transcript views (``VIEWS``, ``MESSAGE_HOOKS``,
  ``FINAL_HOOKS``);
- here: ``export_run`` picks one by ``--as`` style; ``export_sweep`` prints
  every cell's final synthesis of a sweep folder, in input order
  (``topic.index``, then cell name), each after a line naming its topic.
"""

from __future__ import annotations

from pathlib import Path

from harness.export.build import ROUND_HOOKS, build_report, incomplete_line
from harness.export.render import RENDERERS
from harness.export.shape import EXPORT_VERSION, Report
from harness.export.views import FINAL_HOOKS, MESSAGE_HOOKS, VIEWS, NoFinal, final_synthesis, messages
from harness.store.reader import RunFolder, find_runs, read_config, read_run

__all__ = [
    "EXPORT_VERSION",
    "FINAL_HOOKS",
    "MESSAGE_HOOKS",
    "RENDERERS",
    "ROUND_HOOKS",
    "STYLES",
    "VIEWS",
    "NoFinal",
    "Report",
    "UnreadableLog",
    "build_report",
    "export_noted",
    "export_run",
    "export_sweep",
    "final_synthesis",
    "messages",
    "sweep_cells",
]

STYLES = [*RENDERERS, *VIEWS]


class UnreadableLog(ValueError):
    """A log line, written whole, that does not parse; the message is one line naming it."""


def read_exported(run_dir: Path) -> RunFolder:
    """``run_dir`` read for an export. A torn last line is what a crash
    leaves, and the run exports what it holds (its report says so). A whole
    line that does not parse is damage: the reader stops there, and an
    export would drop every line after it without a word (a transcript view
    has no room for notes), so it is refused, naming the file and the line."""
    run = read_run(run_dir, skip=("prompts.jsonl",))
    for note in run.notes:
        if "torn last line" not in note:  # the reader's note, less the parser's page of detail
            where = note.split(" unreadable (")[0]
            raise UnreadableLog(
                f"{where} is no readable record; not exported, as every line after it would be left out "
                f"(python -m harness.verify {run_dir} says more)"
            )
    return run


def export_run(run_dir: Path, style: str = "md") -> str:
    """The report or transcript view of the run in ``run_dir``, rendered as ``style``."""
    return export_noted(run_dir, style)[0]


def export_noted(run_dir: Path, style: str = "md") -> tuple[str, str | None]:
    """``export_run``'s text, and for a transcript view of a run that did not complete
    (or lost a torn line) the line saying so: a report carries it in its header, a
    view has no room for it, so the command prints it on stderr."""
    run = read_exported(run_dir)
    if style in RENDERERS:
        return RENDERERS[style](build_report(run)), None
    return VIEWS[style](run), incomplete_line(run, "the transcript")


def sweep_cells(sweep_dir: Path) -> list[Path]:
    """A sweep's run folders in input order: by ``topic.index``, then by name."""

    def order(run_dir: Path) -> tuple[int, str]:
        topic = read_config(run_dir).get("topic") or {}
        index = topic.get("index", 0) if isinstance(topic, dict) else 0
        return (index if isinstance(index, int) else 0, run_dir.name)

    return sorted(find_runs(sweep_dir), key=order)


def export_sweep(sweep_dir: Path) -> tuple[str, list[str]]:
    """Every cell's final synthesis, each after a ``Topic: ...`` line; and the
    cells that have none (each still gets its topic line, and a note)."""
    out, missing = [], []
    for run_dir in sweep_cells(sweep_dir):
        run = read_exported(run_dir)
        text = final_synthesis(run)
        if text is None:
            missing.append(run_dir.name)
            text = f"(no final synthesis: the run is {run.manifest.status})"
        out.append(f"Topic: {run.manifest.topic or '(none)'} [{run_dir.name}]\n{text}")
    return "\n\n".join(out) + "\n" if out else "", missing
