"""The worked example's record kind and event (docs/adding-a-format.md),
in a module that imports nothing above ``harness.store.records``: the
format's module imports it, and an installed plugin names it in the
``drift_harness.records`` entry point group, so a reader in a new process
(export, the store, the analysis) parses the format's runs without
importing its engine (``harness.plugins``)."""

from __future__ import annotations

from typing import Literal

from harness.store.records import Envelope, register_event, register_record


@register_record
class FollowUpRecord(Envelope):
    """A question of round ``round`` follows up the Guest's answer ``answer_id`` (private to the Host)."""

    kind: Literal["follow_up"] = "follow_up"
    question_id: str
    answer_id: str


register_event("sign_off")  # the Host closes the interview, after the last answer
