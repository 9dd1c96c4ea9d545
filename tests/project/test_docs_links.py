"""README.md and docs/*.md: every relative link and image resolves, every docs page is reachable
from README, and README stays short (at most 300 lines, the rest in docs/).

A link is `[text](target)` or `![alt](target)` outside code (fenced blocks and `inline code` are
skipped); http(s) and mailto targets are not fetched. A target is a path relative to the page that
holds it, optionally with `#anchor`; the path must be a file (or folder) of the repository, and an
anchor must be the GitHub slug of a heading of the target page (or of the page itself for `#x`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MAX_README_LINES = 300

# Pages README may link before they land (a page written on another branch). A missing page here is
# tolerated, nothing else; once it exists it is checked like any other page. Empty: every page landed.
PENDING: set[str] = set()

FENCE = re.compile(r"^( {0,3})(```|~~~).*?^\1\2[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def pages() -> list[Path]:
    return [README, *sorted((REPO / "docs").glob("*.md"))]


def rel(path: Path, root: Path = REPO) -> str:
    return path.relative_to(root).as_posix()


def strip_code(text: str) -> str:
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    return LINK.findall(strip_code(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation but - and _ removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def broken(page: Path, root: Path = REPO) -> list[str]:
    problems = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        try:
            where = rel(dest, root)
        except ValueError:
            problems.append(f"{rel(page, root)}: {target} leaves the repository")
            continue
        if not dest.exists():
            if where in PENDING:
                continue
            problems.append(f"{rel(page, root)}: {target} -> {where} does not exist")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            problems.append(f"{rel(page, root)}: {target} -> no heading #{anchor} in {where}")
    return problems


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_every_link_and_image_resolves(page: Path) -> None:
    problems = broken(page)
    assert not problems, "\n".join(problems)


def test_readme_links_every_docs_page() -> None:
    linked = {rel((REPO / t.partition("#")[0]).resolve()) for t in links(README.read_text())
              if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I) and t.partition("#")[0]}
    missing = [rel(p) for p in sorted((REPO / "docs").glob("*.md")) if rel(p) not in linked]
    assert not missing, f"docs pages README does not link: {missing}"
    assert PENDING <= linked, f"pending pages README should already link: {PENDING - linked}"


def test_readme_is_short() -> None:
    n = len(README.read_text().splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines; move detail into docs/ (at most {MAX_README_LINES})"


def test_readme_keeps_the_two_commands() -> None:
    # the project's rule: on a fresh machine `make run` and `make test` do all set-up, and README says so
    text = README.read_text()
    assert "make run" in text and "make test" in text
    assert "\nmake test" in text  # the test command in a block of its own, as CI (.ci/run) runs it


def test_the_checker_catches_what_it_is_for(tmp_path: Path) -> None:
    """The scanner itself: a missing file, a missing anchor and a link in code; slugs as GitHub makes them."""
    assert slug("The paper's Tables 3 and 4 at CPU scale") == "the-papers-tables-3-and-4-at-cpu-scale"
    assert slug("`make run` over five seeds: groups of 8") == "make-run-over-five-seeds-groups-of-8"
    assert slug("Why 12,000 people") == "why-12000-people"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
    assert links("see [x](a.md#b), ![i](img/p.png) and `[y](code.md)`\n```\n[z](fenced.md)\n```\n") == [
        "a.md#b", "img/p.png"]
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# Here\n")
    page.write_text("[ok](there.md#here) [gone](missing.md) [bad](there.md#nowhere) [web](https://x.y/z)\n")
    problems = broken(page, root=tmp_path)
    assert len(problems) == 2, problems
    assert "missing.md does not exist" in problems[0] and "no heading #nowhere" in problems[1]
