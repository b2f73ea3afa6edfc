"""python -m harness.resume <run_dir> [--force] [key=value ...] — continue a run.

The run continues from its own ``config.yaml`` (never from defaults), from
the newest snapshot the memory files agree with. Nodes of the unfinished
round replay from the records that already landed (ids are deterministic),
so nothing is duplicated and the transcript equals an uninterrupted run's.
The fingerprint must match unless ``--force``, which is recorded. Overrides
may change only what the fingerprint allows, e.g. ``rounds=100`` to extend.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from harness.config import Config, ConfigError, validate
from harness.context import ModelCallError
from harness.engine import RunResult, build_roles, execute, preflight
from harness.fingerprint import components, differences, read_fingerprint
from harness.formats import FORMATS
from harness.models.base import ModelConfigError
from harness.progress import summary_line
from harness.records import HistoryEntry
from harness.rundir import RunInUseError, RunLock, read_manifest
from harness.snapshot import latest_valid

REDACTED = "***REDACTED***"


class ResumeError(RuntimeError):
    """The run cannot be resumed as asked; the message says why in one line."""


def load_config(run_dir: Path, overrides: list[str]) -> Config:
    """The run's own config, with ``overrides`` applied and redacted secrets unset
    (they come from the environment again, as at the start)."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise ResumeError(f"{path}: not found; is this a run folder?")
    raw = yaml.safe_load(path.read_text())

    def unredact(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (None if v == REDACTED else unredact(v)) for k, v in node.items()}
        return node

    merged = OmegaConf.merge(OmegaConf.create(unredact(raw)), OmegaConf.from_dotlist(overrides))
    container = OmegaConf.to_container(merged, resolve=True)
    assert isinstance(container, dict)
    return validate({str(k): v for k, v in container.items()})


def resume_run(run_dir: Path, *, force: bool = False, overrides: list[str] | None = None) -> RunResult:
    run_dir = Path(run_dir)
    cfg = load_config(run_dir, overrides or [])
    preflight(cfg)
    with RunLock(run_dir):
        manifest = read_manifest(run_dir)
        snap, skipped = latest_valid(run_dir)
        if snap is None:
            _, initial_state, _ = FORMATS[cfg.format.name]
            state = dict(initial_state("" if cfg.topic.generate else cfg.topic.text))
        else:
            state = dict(snap.state)
            # a finished run extended with rounds=N continues past its old end
            state["done"] = bool(state.get("stop_reason")) or state["round"] > cfg.rounds
        if manifest.status == "completed" and state["done"]:
            return RunResult(run_dir, manifest, state, cfg.rounds, "already completed; nothing to do")
        roles = build_roles(cfg)
        changed = differences(read_fingerprint(run_dir), components(cfg, roles))
        if changed and not force:
            raise ResumeError(
                f"fingerprint mismatch ({len(changed)} change(s)): {'; '.join(changed[:5])}"
                " — pass --force to resume anyway"
            )
        detail = f"from round {snap.round if snap else 0}" + (f"; forced past: {changed}" if changed else "")
        if skipped:
            detail += f"; skipped snapshots: {skipped}"
        manifest.history.append(HistoryEntry(action="resume_forced" if changed else "resume", detail=detail))
        return execute(cfg, run_dir, roles, manifest, state, base=snap, resumed=detail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.resume", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--force", action="store_true", help="resume despite a fingerprint mismatch")
    parser.add_argument("overrides", nargs="*", help="key=value changes, e.g. rounds=100")
    args = parser.parse_args(argv)
    try:
        result = resume_run(args.run_dir, force=args.force, overrides=args.overrides)
    except (ConfigError, ModelConfigError, ResumeError, RunInUseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModelCallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(f"resume later with: python -m harness.resume {args.run_dir}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"interrupted; resume with: python -m harness.resume {args.run_dir}", file=sys.stderr)
        return 130
    return report(result)


def report(result: RunResult) -> int:
    """Print the summary and the run folder (last line); exit code by status."""
    manifest = result.manifest
    if result.note:
        print(result.note, file=sys.stderr)
    if manifest.status == "interrupted":
        print(
            f"interrupted after round {manifest.counts.rounds_completed}; "
            f"resume with: python -m harness.resume {result.run_dir}",
            file=sys.stderr,
        )
    print(summary_line(manifest, result.rounds))
    print(result.run_dir)
    return 130 if manifest.status == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main())
