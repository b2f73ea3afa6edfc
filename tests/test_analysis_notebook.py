"""The notebook runs top to bottom against a tree of scripted runs made here."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "drift_analysis.ipynb"


def test_notebook_executes(run, runs_root, monkeypatch):
    for temperature in (0.2, 0.9):
        for seed in (1, 2):
            run("rounds=4", f"llm.temperature={temperature}", f"seed={seed}")
    monkeypatch.setenv("DRIFT_RUNS", str(runs_root))
    monkeypatch.setenv("DRIFT_EMBEDDER", "hash")  # the real model is covered by the validity tests
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "T=0.2" in text and "T=0.9" in text and "p_value" in text  # the worked comparison ran
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 4  # the four figures, inline
    assert (runs_root / "_analysis" / "cache").is_dir()
