"""Committed report files name paths relative to the repository: no file under reports/ holds the absolute path of
the checkout, of root's home (the model cache) or of a temporary folder a run made (a rerun on another clone must not
rewrite them). Paths inside the data itself (a tool argument such as '/Users/John/notes.txt') are data, not paths of
this machine, and are not looked for."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the checkout itself (here, and where the committed reports were made), root's home, and the temporary folders runs
# and tests make
MACHINE = [re.escape(str(ROOT)), r"/work/main\b", r"/root/", r"/tmp/(?:tmp|toolpaper|pytest|wt\b)",
           r"/private/var/folders/"]


def report_files() -> list[Path]:
    "The files under reports/ that git tracks (every file there, outside a git checkout)."
    r = subprocess.run(["git", "ls-files", "reports"], cwd=ROOT, capture_output=True, text=True)
    names = r.stdout.split() if r.returncode == 0 else []
    return [ROOT / n for n in names] or [p for p in (ROOT / "reports").rglob("*") if p.is_file()]


def machine_paths(text: str) -> list[str]:
    return sorted({m.group(0) for m in re.finditer("|".join(MACHINE), text)})


def test_the_check_sees_machine_paths():
    assert machine_paths(f"out_dir: {ROOT}/reports/x, tmp /tmp/tmpab12") == sorted([f"{ROOT}", "/tmp/tmp"])
    assert machine_paths("/root/.cache/toolpaper/models/x") == ["/root/"]
    assert machine_paths("reports/seal_tools/README.md, http://127.0.0.1:8000/v1, '/Users/John/a.txt'") == []


def test_no_committed_report_file_holds_a_machine_path():
    bad = {}
    for p in report_files():
        try: text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError): continue
        found = machine_paths(text)
        if found: bad[str(p.relative_to(ROOT))] = found
    assert not bad, f"{len(bad)} report file(s) hold absolute machine paths, e.g. {dict(list(bad.items())[:5])}"
