"""The citation checker on hand-made cases: supported verbatim and after
folding whitespace and case, unsupported, unknown, and the retry reasons."""

from __future__ import annotations

import pytest

from harness.search.citations import bad_citations, check_citation, check_citations, normalise, reasons
from harness.store.records import Citation

JOB_1_21 = (
    "And said, Naked came I out of my mother's womb, and naked shall I return thither: "
    "the LORD gave, and the LORD hath taken away; blessed be the name of the LORD."
)
PASSAGES = {"Job.1.21": JOB_1_21, "notes.md#2": "Suffering\n  is   not\tpunishment."}


@pytest.mark.parametrize(
    ("pid", "quote", "status"),
    [
        ("Job.1.21", "the LORD gave, and the LORD hath taken away", "supported"),  # verbatim
        ("Job.1.21", "THE LORD GAVE,  and the lord\nhath taken away", "supported"),  # case and whitespace
        ("Job.1.21", '"blessed be the name of the LORD"', "supported"),  # quote marks around the span
        ("Job.1.21", "naked shall I return thither…", "supported"),  # a trailing ellipsis marks a cut
        ("notes.md#2", "suffering is not punishment", "supported"),  # the passage's own line breaks and tabs
        ("Job.1.21", "the LORD gave, and the LORD gave again", "unsupported"),  # the passage lacks it
        ("Job.1.21", "the LORD gave and the LORD hath taken away", "unsupported"),  # punctuation counts
        ("Job.1.21", "", "unsupported"),  # an empty quote supports nothing
        ("Job.1.22", "the LORD gave", "unknown"),  # no such passage
        ("job.1.21", "the LORD gave", "unknown"),  # ids are exact
    ],
)
def test_each_citation_is_marked_against_its_passage(pid, quote, status):
    (marked,) = check_citations([Citation(id=pid, quote=quote)], PASSAGES.get)
    assert marked.status == status and (marked.id, marked.quote) == (pid, quote)


def test_marks_leave_the_input_alone_and_reasons_name_each_failure():
    cites = [
        Citation(id="Job.1.21", quote="the LORD gave"),
        Citation(id="Job.1.21", quote="the LORD kept"),
        Citation(id="Job.9.99", quote="anything"),
    ]
    marked = check_citations(cites, PASSAGES.get)
    assert [c.status for c in marked] == ["supported", "unsupported", "unknown"]
    assert all(c.status is None for c in cites)  # a copy is marked, never the caller's objects
    assert [c.id for c in bad_citations(marked)] == ["Job.1.21", "Job.9.99"]
    why = reasons(marked)
    assert "[Job.1.21] 'the LORD kept': the passage does not contain the quoted words" in why
    assert "[Job.9.99] 'anything': no passage has this id" in why and "the LORD gave'" not in why


def test_a_citation_checked_twice_gets_the_same_mark():
    once = check_citation(Citation(id="Job.1.21", quote="Naked came I"), JOB_1_21)
    assert check_citation(once, JOB_1_21) == once and normalise(" A\n b ") == "a b"
