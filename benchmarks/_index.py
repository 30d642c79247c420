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
