"""Shared by the benchmark scripts: each page names the commit it was measured at, and reports/benchmarks/README.md
lists every benchmark page found there with that commit."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_AT = re.compile(r"^Measured at commit `([0-9a-f]+)`( with uncommitted changes)?\.", re.M)


def measured_at(out=None) -> dict:
    """{'git_commit', 'git_dirty'} of the repository the benchmark runs from; changes under `reports/` (every page, and
    the stage caches a background regeneration is writing) or under `out` are outputs and do not count."""
    from toolpaper.report import code_state
    return code_state(ROOT, [ROOT / "reports"] + ([out] if out is not None else []))


def commit_line(code) -> str:
    "The line a page ends with: the commit of `code` (a `measured_at` result), or that none was recorded."
    if not code or not code.get("git_commit"): return "Commit not recorded."
    dirty = " with uncommitted changes" if code.get("git_dirty") else ""
    return f"Measured at commit `{code['git_commit'][:12]}`{dirty}."


def write_index(out: Path) -> Path:
    """Write `out/README.md`: one line per benchmark page (its first heading and the commit it names), so the reports
    index can link them all."""
    from toolpaper.io import atomic_write_text
    out = Path(out)
    lines = [
        "# Benchmarks",
        "",
        "Speed measurements written by the scripts in `benchmarks/` (each page says how it was produced and the commit "
        "it was measured at; pages measured before the scripts recorded it say 'commit not recorded').",
        "",
    ]
    for p in sorted(out.glob("*.md")):
        if p.name == "README.md": continue
        text = p.read_text(encoding="utf-8")
        head = next((l.lstrip("# ").strip() for l in text.splitlines() if l.startswith("#")), p.stem)
        m = _AT.search(text)
        at = f"commit `{m.group(1)}`{m.group(2) or ''}" if m else "commit not recorded"
        lines.append(f"- [{head}]({p.name}) — {at}")
    return atomic_write_text(out / "README.md", "\n".join(lines) + "\n")


def write_page(out, stem: str, res: dict, md: str) -> Path:
    """Write a benchmark's run data (`stem.json`, with the commit under 'code' unless `res` already holds one, as a
    re-rendered page does) and page (`stem.md`, ending with that commit) into `out`, then refresh the index."""
    import json
    from toolpaper.io import atomic_write_text
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    res.setdefault("code", measured_at(out))
    atomic_write_text(out / f"{stem}.json", json.dumps(res, indent=1) + "\n")
    atomic_write_text(out / f"{stem}.md", md.rstrip("\n") + "\n\n" + commit_line(res["code"]) + "\n")
    return write_index(out)
