"""The docs say how things work, not when they last ran (issue 76): no dates or 'this machine' in docs/ (a measurement
names its page, which states machine, load and commit), and the module map in docs/development.md names every
notebook."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bthis (?:\d+-core )?machine\b", re.IGNORECASE)


def dated_lines(root: Path) -> list[str]:
    "'file:line: text' of every line under `root` (Markdown) holding a date or 'this machine'."
    return [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:100]}" for p in sorted(root.rglob("*.md"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if DATED.search(line)]


def test_docs_carry_no_dates_or_this_machine():
    assert not dated_lines(ROOT / "docs"), "\n".join(dated_lines(ROOT / "docs"))


def test_dated_lines_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    (tmp_path / "a.md").write_text("Rerun on 2026-11-28.\nOn this 2-core machine it took 14 min.\nHow it works.\n")
    assert [x.split(":")[1] for x in dated_lines(tmp_path)] == ["1", "2"]


def test_module_map_names_every_notebook():
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([\w/]+)` \|", text, re.MULTILINE))
    nbs = {p.stem for p in (ROOT / "nbs").glob("*.ipynb")} | {
        f"experiments/{p.stem}" for p in (ROOT / "nbs" / "experiments").glob("*.ipynb")}
    assert not nbs - rows, f"notebooks missing from the module map in docs/development.md: {sorted(nbs - rows)}"
    assert not rows - nbs, f"module map rows without a notebook: {sorted(rows - nbs)}"
