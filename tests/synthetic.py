"""Test fixture: write run folders from given texts, through the harness's
own record types and logs, for the analysis tests and benchmarks (no model
involved). Tests import it as ``synthetic``; benchmarks put tests/ on sys.path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from harness.formats import get_format, validate
from harness.store.memory import RunMemory
from harness.store.records import (
    FOLDER_VERSION,
    ArgumentRecord,
    CritiqueRecord,
    PersonaRecord,
    RunManifest,
    ThinkingRecord,
    record_id,
)
from harness.store.rundir import write_manifest


def write_run(
    run_dir: Path,
    arguments: Sequence[tuple[int, str, str]],
    persona: str = "A calm analyst.",
    config: dict | None = None,
) -> Path:
    """A completed run whose published turns are ``(round, team, text)``, each
    approved on its first draft. ``config`` is written as config.yaml."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config or {"seed": 0, "llm": {"temperature": 0.7}}))
    teams = list(dict.fromkeys(team for _, team, _ in arguments))
    layout = get_format("drift").layout(validate({"format": {"name": "drift", "teams": teams}}))
    memory = RunMemory(run_dir, layout, fsync=False)
    for round_, team, text in arguments:
        view = memory.seat(team)
        common = {"round": round_, "team": team, "iteration": 0}

        def rid(role: str) -> str:
            return record_id(round_, team, role, 0)  # noqa: B023 (used at once, inside the loop)

        p = view.persona.append(
            PersonaRecord.model_validate(
                {
                    **common,
                    "id": rid("persona"),
                    "role": "persona",
                    "decision": "keep",
                    "persona": persona,
                    "rationale": "",
                    "version": 1,
                }
            )
        )
        t = view.thinking.append(
            ThinkingRecord.model_validate(
                {
                    **common,
                    "id": rid("thinking"),
                    "role": "thinking",
                    "scratchpad": "",
                    "draft": text,
                    "persona_id": p.id,
                }
            )
        )
        c = view.critique.append(
            CritiqueRecord.model_validate(
                {
                    **common,
                    "id": rid("critique"),
                    "role": "critique",
                    "is_approved": True,
                    "feedback": "ok",
                    "draft_id": t.id,
                }
            )
        )
        memory.shared.append(
            ArgumentRecord.model_validate(
                {
                    **common,
                    "id": rid("argument"),
                    "role": "argument",
                    "text": text,
                    "draft_id": t.id,
                    "critique_id": c.id,
                    "source": "approved",
                }
            )
        )
    rounds = max((a[0] for a in arguments), default=0)
    manifest = RunManifest(
        folder_version=FOLDER_VERSION,
        run_id=run_dir.name,
        format="drift",
        seed=0,
        status="completed",
        layout=layout,
    )
    manifest.counts.rounds_completed = rounds
    write_manifest(run_dir, manifest)
    return run_dir
