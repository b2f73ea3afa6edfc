"""Cells named and plotted by what varies: labels from the keys that differ
between the runs analysed together (or the sweep's own overrides), and a
sweep heatmap with one square per cell that averages only when asked."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import compose_cfg
from matplotlib.axes import Axes
from omegaconf import DictConfig, OmegaConf

from analysis import load_runs, sweep_heatmap
from analysis.__main__ import main
from analysis.labels import cells_table, label_cells
from analysis.tables import cell_of
from harness.config import resolve
from harness.engine import run_debate
from harness.sweep.grid import plan_cells
from harness.sweep.index import INDEX_JSON, SweepIndex

GRID = ["model.persona_drift_rate=0,0.05", "memory.window_rounds=1,2", "replicate=0,1"]
DRIFT, WINDOW = "cfg.model.persona_drift_rate", "cfg.memory.window_rounds"


def run_in(base: DictConfig, folder: Path, *overrides: str) -> None:
    """A run of ``base`` with plain ``key=value`` overrides (composed once: Hydra takes
    half of a scripted run's time), in ``folder``."""
    cfg = copy.deepcopy(base)
    for key, value in (o.split("=", 1) for o in (f"runs_root={folder}", *overrides)):
        OmegaConf.update(cfg, key, yaml.safe_load(value))
    raw = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(raw, dict)
    run_debate(resolve(cfg), raw)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``sweep-x/``, a sweep folder as the driver leaves it (its planned cells' runs and
    ``sweep.json``), and ``single/``, one more run at another temperature."""
    root = tmp_path_factory.mktemp("runs")
    base = compose_cfg(["model=scripted", "progress=false", "rounds=1", "replicates=2"])
    sweep = root / "sweep-x"
    cells = plan_cells(GRID)
    second = [c for c in cells if c.params["replicate"] == "1"][:1]  # one is enough to share a cell
    for cell in [c for c in cells if c.params["replicate"] == "0"] + second:
        run_in(base, sweep, *cell.overrides, f"run_name={cell.name}")
    index = SweepIndex(
        name=sweep.name, launcher="basic", task_overrides=GRID, hydra_overrides=[], cells=cells
    )
    (sweep / INDEX_JSON).write_text(index.model_dump_json())
    run_in(base, root / "single", "llm.temperature=0.3")
    return root


def parsed(label: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in label.split())


def panels(fig: Any) -> list[Axes]:
    return [ax for ax in fig.axes if ax.images]  # less the colour bars


def ticks(labels: list[Any]) -> list[str]:
    return [t.get_text() for t in labels]


def test_a_sweep_over_two_unusual_keys_is_named_by_both(root):
    runs = load_runs(root / "sweep-x", cache=False).runs
    assert len(runs) == 5 and sorted(runs.groupby("cell").size()) == [1, 1, 1, 2]  # replicates share a cell
    # the overrides as typed, only those that vary (not the replicate), no hash
    typed = {
        parsed(label)["persona_drift_rate"] + "/" + parsed(label)["window_rounds"]
        for label in runs.cell_label
    }
    assert typed == {"0/1", "0/2", "0.05/1", "0.05/2"}
    assert all(parsed(label).keys() == {"persona_drift_rate", "window_rounds"} for label in runs.cell_label)
    assert runs.groupby("cell_label").cell.nunique().eq(1).all() and runs.cell_label.nunique() == 4

    # with one more run at another temperature, outside the sweep, the sweep's
    # overrides no longer explain what varies: the configs name it, T included
    runs = load_runs(root, cache=False).runs
    for row in runs.to_dict("records"):
        shown = parsed(row["cell_label"])
        assert shown.keys() == {"T", "persona_drift_rate", "window_rounds"}, row["cell_label"]
        assert float(shown["T"]) == row["cfg.llm.temperature"] and int(shown["window_rounds"]) == row[WINDOW]
        assert float(shown["persona_drift_rate"]) == row[DRIFT]
    assert runs.cell_label.nunique() == runs.cell.nunique() == 5


def test_the_heatmap_of_a_sweep_has_one_square_per_cell(root):
    runs = load_runs(root / "sweep-x", cache=False).runs
    # a planted final drift: the replicate moves it, so a square is the mean of its cell's runs
    final = runs.assign(drift_index=10 * runs[DRIFT] + runs[WINDOW] + runs["cfg.replicate"])
    [ax] = panels(sweep_heatmap(final))
    assert (ax.get_ylabel(), ax.get_xlabel()) == ("window_rounds", "persona_drift_rate")
    assert ticks(ax.get_yticklabels()) == ["1", "2"] and ticks(ax.get_xticklabels()) == ["0.0", "0.05"]
    expected = final.pivot_table(index=WINDOW, columns=DRIFT, values="drift_index", aggfunc="mean")
    np.testing.assert_allclose(ax.images[0].get_array(), expected.to_numpy())
    assert "mean over" not in ax.get_title()


def runs_frame(configs: list[dict[str, Any]], **extra: Any) -> pd.DataFrame:
    """A runs table of hand-made configs, each cell hashed as the loader hashes it."""
    rows = []
    for i, cfg in enumerate(configs):
        row = {"run_id": f"r{i}", "format": "drift", "has_critic": True, **extra}
        row.update({f"cfg.{k}": v for k, v in cfg.items()})
        row["cell"], row["cell_label"] = cell_of(row)
        rows.append(row)
    return pd.DataFrame(rows)


def three_keys() -> pd.DataFrame:
    """T x drift rate x window, two replicates each, the critic held fixed; a planted final drift."""
    configs = [
        {
            "llm.temperature": t,
            "model.persona_drift_rate": d,
            "memory.window_rounds": w,
            "critic.name": "balanced",
        }
        | {"replicate": r, "seed": r}
        for t, d, w, r in itertools.product((0.3, 1.0), (0.0, 0.05), (1, 2), (0, 1))
    ]
    runs = label_cells(runs_frame(configs))
    return runs.assign(
        drift_index=runs["cfg.llm.temperature"] + 10 * runs[DRIFT] + 100 * runs[WINDOW] + runs["cfg.seed"]
    )


def test_labels_name_only_what_varies():
    runs = three_keys()
    assert runs.cell_label.nunique() == runs.cell.nunique() == 8
    assert all(
        parsed(label).keys() == {"T", "persona_drift_rate", "window_rounds"} for label in runs.cell_label
    )
    table = cells_table(runs)  # one row per cell, its varying keys as columns
    assert len(table) == 8 and (table.runs == 2).all()
    assert {"cfg.llm.temperature", DRIFT, WINDOW} <= set(table.columns) and "cfg.critic.name" not in table
    # nothing varies: the loader's own label stays
    same = runs_frame([{"llm.temperature": 0.3, "replicate": r} for r in (0, 1)])
    assert label_cells(same).cell_label.tolist() == same.cell_label.tolist()


def test_a_group_choice_stands_for_its_keys_and_labels_never_repeat():
    # two models, each with keys of its own: the spec alone names them
    runs = label_cells(
        runs_frame(
            [
                {
                    "model.spec": "scripted:default",
                    "model.persona_drift_rate": 0.0,
                    "memory.window_rounds": 1,
                },
                {"model.spec": "local:smollm2", "model.n_ctx": 2048, "memory.window_rounds": 1},
            ]
        )
    )
    assert runs.cell_label.tolist() == ["model=scripted:default", "model=local:smollm2"]
    # runs without a critic leave critic keys out of their labels; two cells that
    # would then read alike are told apart by a hash, and only they
    panel = runs_frame(
        [{"critic.name": c, "llm.temperature": 0.7} for c in ("lenient", "strict")], has_critic=False
    )
    labels = label_cells(panel).cell_label
    assert labels.nunique() == 2 and all("critic=" not in label for label in labels)
    assert [label.split(" [")[1][:-1] for label in labels] == [cell[:6] for cell in panel.cell]


def test_the_heatmap_facets_the_other_keys_and_averages_only_when_asked():
    final = three_keys()
    fig = sweep_heatmap(final, x="persona_drift_rate", y="T")
    axes = panels(fig)
    assert [ax.get_title().splitlines()[-1] for ax in axes] == ["window_rounds=1", "window_rounds=2"]
    squares = sum(int(np.isfinite(ax.images[0].get_array()).sum()) for ax in axes)
    assert squares == final.cell.nunique()  # one square per cell, none averaged
    for ax, window in zip(axes, (1, 2), strict=True):
        part = final[final[WINDOW] == window]
        expected = part.pivot_table(index="cfg.llm.temperature", columns=DRIFT, values="drift_index")
        np.testing.assert_allclose(ax.images[0].get_array(), expected.to_numpy())
        assert "mean over" not in ax.get_title()
    # by default T (the first key) is on y, and the rest are facets
    assert len(panels(sweep_heatmap(final))) == 2

    [ax] = panels(sweep_heatmap(final, x="persona_drift_rate", y="T", average=["window_rounds"]))
    assert "mean over window_rounds" in ax.get_title()
    expected = final.pivot_table(index="cfg.llm.temperature", columns=DRIFT, values="drift_index")
    np.testing.assert_allclose(ax.images[0].get_array(), expected.to_numpy())


def test_heatmap_keys_that_name_nothing_are_one_line_errors():
    final = three_keys()
    with pytest.raises(ValueError, match=r"x='nope' is no config key .*varying: T, window_rounds"):
        sweep_heatmap(final, x="nope")
    with pytest.raises(ValueError, match="average='critic.name' does not vary"):
        sweep_heatmap(final, average=["critic.name"])
    with pytest.raises(ValueError, match="x='T' is also y"):
        sweep_heatmap(final, x="T", y="cfg.llm.temperature")


def test_a_heatmap_key_that_names_nothing_stops_the_cli_before_the_signals(root, capsys):
    args = [str(root / "sweep-x"), "--embedder", "hash", "--no-progress", "--no-cache", "--heatmap-x", "nope"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "x='nope'" in err and "persona_drift_rate" in err
    assert not (root / "sweep-x" / "_analysis").exists()  # nothing computed, nothing written
