"""The library is generated from the notebooks: exporting them again must leave toolpaper/ unchanged."""
import shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_nbdev_export_leaves_library_unchanged(tmp_path):
    for name in ["settings.ini", "setup.py"]:
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "nbs", tmp_path / "nbs")
    shutil.copytree(ROOT / "toolpaper", tmp_path / "toolpaper", ignore=shutil.ignore_patterns("__pycache__"))
    exe = Path(sys.executable).with_name("nbdev_export")
    r = subprocess.run([str(exe)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    changed = [p.name for p in sorted((ROOT / "toolpaper").glob("*.py"))
               if (tmp_path / "toolpaper" / p.name).read_text() != p.read_text()]
    new = sorted({p.name for p in (tmp_path / "toolpaper").glob("*.py")} - {p.name for p in (ROOT / "toolpaper").glob("*.py")})
    assert not changed and not new, f"run nbdev_export: out of sync {changed}, not exported {new}"
