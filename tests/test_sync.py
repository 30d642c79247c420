"""The library is generated from the notebooks: exporting them again must leave toolpaper/ unchanged; and
settings.ini names every package it imports."""
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
    new = sorted(
        {p.name for p in (tmp_path / "toolpaper").glob("*.py")} - {p.name for p in (ROOT / "toolpaper").glob("*.py")}
    )
    assert not changed and not new, f"run nbdev_export: out of sync {changed}, not exported {new}"


def test_settings_ini_lists_every_runtime_requirement():
    """Every third-party package the library imports (at module level or inside a function) is in settings.ini
    `requirements`."""
    import ast, configparser, re
    from importlib.metadata import packages_distributions
    cfg = configparser.ConfigParser(); cfg.read(ROOT / "settings.ini")
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
    listed = {norm(re.split(r"[<>=!~;\[ ]", r)[0]) for r in cfg["DEFAULT"]["requirements"].split()}
    imported = set()
    for p in (ROOT / "toolpaper").glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    dists = packages_distributions()
    third = {m for m in imported if m not in sys.stdlib_module_names and m != "toolpaper"}
    missing = sorted(
        f"{m} ({', '.join(dists.get(m, ['not installed']))})"
        for m in third
        if not any(norm(d) in listed for d in dists.get(m, [m]))
    )
    assert not missing, f"imported but not in settings.ini requirements: {missing}"


def test_every_notebook_is_valid_nbformat_with_cell_ids():
    """Every notebook (library and experiments) validates as nbformat 4.5 with an id on each cell, so papermill and
    nbformat run them without warnings or rewriting them."""
    import json, nbformat
    bad = []
    for p in sorted((ROOT / "nbs").rglob("*.ipynb")):
        raw = json.loads(p.read_text())              # as written: nbformat.read would add missing ids in memory
        missing = [i for i, c in enumerate(raw["cells"]) if "id" not in c]
        if missing: bad.append(f"{p.relative_to(ROOT)}: cells {missing} have no id")
        else:
            try: nbformat.validate(nbformat.from_dict(raw))
            except nbformat.ValidationError as e: bad.append(f"{p.relative_to(ROOT)}: {e.message}")
    assert not bad, "\n".join(bad)
