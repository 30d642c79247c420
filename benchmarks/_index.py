"""Shared by the benchmark scripts: reports/benchmarks/README.md lists every benchmark page found there."""
from pathlib import Path


def write_index(out: Path) -> Path:
    "Write `out/README.md`: one line per benchmark page (its first heading), so the reports index can link them all."
    from toolpaper.io import atomic_write_text
    out = Path(out)
    lines = [
        "# Benchmarks",
        "",
        "Speed measurements written by the scripts in `benchmarks/` (each page says how it was produced).",
        "",
    ]
    for p in sorted(out.glob("*.md")):
        if p.name == "README.md": continue
        head = next(
            (l.lstrip("# ").strip() for l in p.read_text(encoding="utf-8").splitlines() if l.startswith("#")), p.stem
        )
        lines.append(f"- [{head}]({p.name})")
    return atomic_write_text(out / "README.md", "\n".join(lines) + "\n")


def write_page(out, stem: str, res, md: str) -> None:
    "Write a benchmark's run data (`stem.json`) and page (`stem.md`) into `out`, then refresh the index."
    import json
    from toolpaper.io import atomic_write_text
    out = Path(out)
    atomic_write_text(out / f"{stem}.json", json.dumps(res, indent=1) + "\n")
    atomic_write_text(out / f"{stem}.md", md + "\n")
    write_index(out)
