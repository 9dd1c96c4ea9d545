"""The figures README.md and docs/*.md quote are what benchmarks/tables.py renders from the result files
(benchmarks/results/): no figure is typed by hand. A rerun benchmark is followed by
`python -m benchmarks.tables`, which rewrites the pages."""

from __future__ import annotations

import json
import shutil

from benchmarks import tables


def test_the_pages_hold_what_the_result_files_give() -> None:
    assert tables.run(check=True) == []


def test_a_changed_result_file_fails_the_check_and_the_script_rewrites_the_page(tmp_path) -> None:
    results, root = tmp_path / "results", tmp_path / "repo"
    shutil.copytree(tables.RESULTS, results)
    for page in tables.PAGES:
        (root / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tables.ROOT / page, root / page)
    doc = json.loads((results / "suite_time.json").read_text())
    doc["wall_s"] += 60
    (results / "suite_time.json").write_text(json.dumps(doc))
    try:
        problems = tables.run(check=True, results=results, root=root)
        assert len(problems) == 1 and problems[0].startswith("README.md: make-test-wall-time-on-a-fresh-clone:"), \
            problems
        assert tables.run(check=False, results=results, root=root) == problems  # the page is rewritten
        assert tables.run(check=True, results=results, root=root) == []
        assert f"**<!-- fig:make-test-wall-time-on-a-fresh-clone -->{tables.minutes_seconds(doc['wall_s'])}" \
            in (root / "README.md").read_text()
    finally:
        tables.run(check=True)  # the repository's results again, for whatever runs next in this process
