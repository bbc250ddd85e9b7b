"""Check the relative links of README.md and docs/*.md (`make docs` runs it).

MkDocs checks the links between pages of docs/ but never reads README.md,
which is outside its docs_dir. This checks both, with the standard library:

- every relative link names a file that exists;
- every ``#anchor`` names a heading of its file under both GitHub's rule and
  MkDocs' (Python-Markdown's toc), so it works on GitHub and in the site;
- README.md and docs/index.md each link every other page of docs/ (the map is
  whole).

Links inside code (fenced blocks, inline spans) are not links. Exit status 1,
with one line per problem, when anything is wrong.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MAPS = (ROOT / "README.md", DOCS / "index.md")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, mailto:, ...


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for every line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def heading_text(raw: str) -> str:
    """A heading as read: links reduced to their text, emphasis and backticks gone."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    return re.sub(r"[`*]", "", text)


def slug_github(text: str) -> str:
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def slug_mkdocs(text: str) -> str:
    """markdown.extensions.toc.slugify with its defaults (ASCII, "-")."""
    value = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def anchors(path: Path) -> set[str]:
    """The anchors both GitHub and MkDocs give the headings of ``path``."""
    github: set[str] = set()
    mkdocs: set[str] = set()
    for _, line in prose_lines(path.read_text()):
        match = HEADING.match(line)
        if not match:
            continue
        text = heading_text(match.group(2))
        for found, slug in ((github, slug_github(text)), (mkdocs, slug_mkdocs(text))):
            unique, n = slug, 0
            while unique in found:  # repeated headings: GitHub adds -1, MkDocs _1
                n += 1
                unique = f"{slug}{'-' if found is github else '_'}{n}"
            found.add(unique)
    return github & mkdocs


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) for every relative link of ``path``."""
    found = []
    for number, line in prose_lines(path.read_text()):
        for match in LINK.finditer(CODE_SPAN.sub("``", line)):
            target = match.group(1)
            if not EXTERNAL.match(target) and not target.startswith("/"):
                found.append((number, target))
    return found


def problems() -> list[str]:
    pages = sorted(DOCS.glob("*.md"))
    found = []
    for path in [ROOT / "README.md", *pages]:
        where = path.relative_to(ROOT)
        for number, target in links(path):
            name, _, anchor = target.partition("#")
            linked = (path.parent / name).resolve() if name else path
            if not linked.is_file():
                found.append(f"{where}:{number}: {target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                found.append(f"{where}:{number}: {target}: no heading #{anchor}")
    for map_page in MAPS:
        listed = {(map_page.parent / t.partition("#")[0]).resolve() for _, t in links(map_page)}
        for page in pages:
            if page.name != "index.md" and page.resolve() not in listed:
                where, missing = map_page.relative_to(ROOT), page.relative_to(ROOT)
                found.append(f"{where}: does not link {missing}")
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
