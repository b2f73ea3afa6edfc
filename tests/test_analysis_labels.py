"""Labels of runs whose configs hold different sections: a section a run lacks
(a run that probes nothing keeps no ``probes`` section) is one setting,
``probes=off``, not one missing value per key; a format's own options go with
``format=<name>``; and two cells that differ never read alike."""

from __future__ import annotations

from typing import Any

import pytest
from test_labels import parsed, runs_frame

from analysis.labels import cells_table, label_cells
from analysis.plots import heatmap_keys

PROBES = {
    "probes.enabled": True,
    "probes.name": "default",
    "probes.use": None,
    "probes.catalog.short_answer.instruction": "Answer in under {n} words.",
    "probes.catalog.short_answer.checker": "max_words",
    "probes.catalog.short_answer.params.n": 60,
    "probes.catalog.ask_back.instruction": "End every reply with a question to the other team.",
    "probes.catalog.ask_back.checker": "ends_with_question",
}
BASE = {
    "format.name": "drift",
    "model.spec": "scripted:default",
    "llm.temperature": 0.7,
    "critic.name": "balanced",
}


def labels_of(configs: list[dict[str, Any]]) -> list[str]:
    return label_cells(runs_frame(configs)).cell_label.tolist()


def test_a_section_some_runs_lack_is_one_key_not_one_per_setting():
    plain, probed = BASE, BASE | PROBES
    assert labels_of([plain, probed]) == ["probes=off", "probes=on"]
    panel = BASE | {"format.name": "panel", "roles.moderator.max_tokens": 384}
    runs = runs_frame([plain, probed, panel])
    runs["format"] = ["drift", "drift", "panel"]
    assert label_cells(runs).cell_label.tolist() == [
        "format=drift probes=off",
        "format=drift probes=on",
        "format=panel probes=off",
    ]
    # the cells table and the heatmap take the section as one key too
    table = cells_table(label_cells(runs))
    assert table["cfg.probes"].tolist() == ["off", "on", "off"]
    assert not any(c.startswith("cfg.probes.") for c in table.columns)
    assert heatmap_keys(runs)[:3] == ("cfg.probes", "cfg.format.name", [])


def test_what_varies_within_a_section_is_named_only_where_the_section_is():
    other = PROBES | {"probes.catalog.short_answer.params.n": 40}
    labels = labels_of([BASE, BASE | PROBES, BASE | other])
    assert labels == ["probes=off", "probes=on n=60", "probes=on n=40"]
    # a key set in one probed run and missing from the other tells them apart
    chosen = PROBES | {"probes.use": '["ask_back"]'}
    labels = labels_of([BASE, BASE | PROBES, BASE | chosen])
    assert [parsed(label) for label in labels] == [
        {"probes": "off"},
        {"probes": "on", "probes.use": "none"},
        {"probes": "on", "probes.use": '["ask_back"]'},
    ]


GROUNDED = {
    "format.name": "grounded",
    "format.max_searches": 2,
    "format.final": "synthesis",
    "format.charlimit": 600,
    "search.k": 5,
    "search.timeout_s": 30,
    "roles.synthesizer.max_tokens": 384,
}
MODERATED = {
    "format.name": "moderated",
    "format.max_strikes": 3,
    "search.k": 5,
    "roles.judge.max_tokens": 384,
}
JUDGE_REFINE = {"format.name": "judge_refine", "format.briefings": False, "roles.judge.max_tokens": 384}


def formats(*configs: dict[str, Any]) -> list[dict[str, Any]]:
    return [BASE | c for c in configs]


def test_a_format_stands_for_its_own_options():
    runs = runs_frame(formats(GROUNDED, MODERATED, JUDGE_REFINE))
    runs["format"] = ["grounded", "moderated", "judge_refine"]
    labels = label_cells(runs).cell_label.tolist()
    assert labels == ["format=grounded", "format=moderated", "format=judge_refine"]
    # an option that varies within a format is still named, in that format's runs
    longer = GROUNDED | {"format.charlimit": 900}
    runs = runs_frame(formats(GROUNDED, longer, MODERATED))
    runs["format"] = ["grounded", "grounded", "moderated"]
    labels = label_cells(runs).cell_label.tolist()
    assert labels == ["format=grounded charlimit=600", "format=grounded charlimit=900", "format=moderated"]


@pytest.mark.parametrize(
    "configs",
    [
        formats(
            GROUNDED, MODERATED, JUDGE_REFINE, GROUNDED | {"search.k": 9}, MODERATED | {"search.k": None}
        ),
        [BASE, BASE | PROBES, BASE | PROBES | {"probes.use": "[a]"}, BASE | {"memory.window_rounds": 2}],
        [
            BASE,
            BASE | {"interviews.rounds": "[1]"},
            BASE | PROBES,
            BASE | PROBES | {"interviews.rounds": "[1]"},
        ],
    ],
)
def test_cells_that_differ_never_read_alike(configs):
    runs = runs_frame(configs)
    runs["format"] = [c["format.name"] for c in configs]
    labels = label_cells(runs)
    assert labels.cell.nunique() == labels.cell_label.nunique() == len(configs)
    assert not any(
        label.endswith(f" [{cell[:6]}]") for cell, label in zip(labels.cell, labels.cell_label, strict=True)
    )  # no hash
    assert all(len(label) < 80 for label in labels.cell_label), labels.cell_label.tolist()
