"""The measured figures of README.md and docs/*.md equal their result files (benchmarks/results/), rounded
as the pages round them.

One test per entry of tests/readme_figures.py: it reads the value from the file (or computes it from
the raw data there), formats it the way the page writes it and asserts the page that quotes it (the
entry's `doc`: README.md or a docs/ page) holds it in its context. A rerun benchmark that changes a
figure fails here until the page follows; a page edit that changes a figure by hand fails until a
result file backs it.
"""

from __future__ import annotations

import re

import pytest

from tests.readme_figures import REGISTRY
from tests.readme_figures_lib import MARK, REPO, RESULTS, Figure, check, context_regex, load, normalise, num, page


@pytest.mark.parametrize("fig", REGISTRY, ids=[f.name for f in REGISTRY])
def test_readme_states_the_result_files_figure(fig: Figure) -> None:
    problem = check(fig, page(fig.doc))
    assert problem is None, problem


def test_registry_entries_are_well_formed() -> None:
    # names are the test ids and what a failure names: a duplicate would hide one entry's result
    names = [f.name for f in REGISTRY]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    for fig in REGISTRY:
        assert fig.context.count(MARK) == 1, f"{fig.name!r}: its context needs exactly one {MARK}"
        assert (RESULTS / fig.file).is_file(), f"{fig.name!r}: no result file benchmarks/results/{fig.file}"
        assert fig.doc == "README.md" or (fig.doc.startswith("docs/") and fig.doc.endswith(".md")), fig.doc
        assert (REPO / fig.doc).is_file(), f"{fig.name!r}: no page {fig.doc}"


def test_each_context_is_found_once_in_its_page() -> None:
    # a context that matched in two places could pass on the wrong occurrence; `after` narrows such ones
    for fig in REGISTRY:
        text = normalise(page(fig.doc))
        scope = text[text.find(fig.after):] if fig.after else text
        hits = len(context_regex(fig.context, None).findall(scope))
        assert hits <= 1 or fig.after, f"{fig.name!r}: context {fig.context!r} occurs {hits} times in {fig.doc}"


def test_the_pages_quoting_figures_are_the_ones_expected() -> None:
    # figures moved out of README into docs/ pages keep their checks there; a page that drops out of
    # this set lost its checks, one that joins it must be a page README links to (tests/project/test_docs_links.py)
    assert {f.doc for f in REGISTRY} == {"README.md", "docs/results.md", "docs/performance.md",
                                         "docs/scaling.md", "docs/real-models.md", "docs/agents.md"}


def test_a_figure_changed_in_readme_is_caught() -> None:
    # the check must be able to fail: edit one figure in a copy of its page and expect a message that
    # names the figure, the file and the value the file holds
    fig = next(f for f in REGISTRY if f.name == "learning table, grpo: greedy EM mean [95% CI]")
    readme = page(fig.doc)
    assert check(fig, readme) is None
    shown = fig.fmt(fig.value())
    tampered = re.sub(re.escape(shown.split(" ")[0]) + r"(\*\*)? \[", "99.9\\1 [", readme, count=1)
    assert tampered != readme
    problem = check(fig, tampered)
    assert problem is not None
    assert fig.name in problem and "benchmarks/results/learning.json" in problem and shown in problem
    assert "'99.9 [" in problem  # what the page says instead


def test_a_changed_result_file_is_caught() -> None:
    # the other direction: the same page against a file whose value moved
    fig = Figure("memory: update peak (tampered file)", "memory.json", "results.update/rows64_micro4_fp32.peak_rss_mib",
                 num(2, scale=1 / 1024), "2 layers) peaks at @@ GiB at `train.micro_batch_size: 4`",
                 get=lambda doc: doc["results"]["update/rows64_micro4_fp32"]["peak_rss_mib"] + 512,
                 doc="docs/real-models.md")
    problem = check(fig, page(fig.doc))
    assert problem is not None and "benchmarks/results/memory.json" in problem and "'4.22'" in problem


def test_rounding_is_half_up_from_the_decimal_text() -> None:
    # Python's own formatting gives '0.517' and '3,292' (binary floats, round-half-even); the pages and people
    # read the JSON's digits and round half up
    assert num(3)(0.5175) == "0.518" and num(0, comma=True)(3292.5) == "3,293" and num(1)(9.95) == "10.0"
    assert load("learning.json") is load("learning.json")  # one parse per file for the whole registry
