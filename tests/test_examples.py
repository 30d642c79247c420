"""Every public function and class of `toolpaper` is shown in an example or test in the notebook that defines it.

A name counts as shown when it appears in a code cell of its notebook that is not exported (an example or a test),
so a reader of the notebook sees it used. `NOT_RUN_IN_NOTEBOOK` is the short allow-list of names that a notebook
cannot run, each with its reason; the test also fails when a listed name gains an example (take it off the list).
"""
import importlib
import inspect
import re
from pathlib import Path

import nbformat

NBS = Path(__file__).resolve().parents[1] / "nbs"

# Public names shown elsewhere, each with the reason its notebook does not run it.
NOT_RUN_IN_NOTEBOOK: dict[str, dict[str, str]] = {
    "02_models": {"convert_gguf": "de-quantises the 135M GGUF model (about 30 s); `ensure_model` runs it on first use, "
                                  "and the notebook's SmolLM2 chat loads its output"},
    "21_serve": {"serve": "blocks, serving until interrupted; tests/test_bench.py runs `toolpaper serve` in a "
                          "subprocess, and the notebook shows `make_app`, `Batcher` and `load_clients` it is made of"},
}


def _export_dirs(src: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#\|\s*(\w+)", src, re.M)}


def notebook_names(nb_path: Path) -> tuple[str | None, set[str], str]:
    "The module a notebook exports to, its public functions and classes, and the text of its example/test cells."
    nb = nbformat.read(nb_path, as_version=4)
    module, shown = None, []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        m = re.search(r"^#\|\s*default_exp\s+(\S+)", c.source, re.M)
        if m:
            module = m.group(1)
        elif not _export_dirs(c.source) & {"export", "exports", "exporti"}:
            shown.append(c.source)
    if module is None:
        return None, set(), ""
    mod = importlib.import_module(f"toolpaper.{module}")
    names = {
        n for n in getattr(mod, "__all__", [])
        if not n.startswith("_") and (inspect.isfunction(obj := getattr(mod, n)) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == mod.__name__
    }
    return module, names, "\n".join(shown)


def missing_examples() -> dict[str, set[str]]:
    "{notebook stem: public names that no example or test cell of that notebook mentions}."
    out = {}
    for p in sorted(NBS.glob("*.ipynb")):
        module, names, shown = notebook_names(p)
        miss = {n for n in names if not re.search(rf"(?<![\w]){re.escape(n)}\b", shown)}
        if miss:
            out[p.stem] = miss
    return out


def test_every_public_name_has_an_example():
    miss = missing_examples()
    new = {nb: sorted(names - set(NOT_RUN_IN_NOTEBOOK.get(nb, {}))) for nb, names in miss.items()}
    new = {nb: names for nb, names in new.items() if names}
    assert not new, f"public names without an example or test in their notebook: {new}"
    stale = {nb: sorted(set(names) - miss.get(nb, set())) for nb, names in NOT_RUN_IN_NOTEBOOK.items()}
    stale = {nb: names for nb, names in stale.items() if names}
    assert not stale, f"these names now have an example: take them off NOT_RUN_IN_NOTEBOOK: {stale}"


def test_counter_sees_examples(tmp_path):
    "The counter itself: an exported name used in a test cell counts as shown, one only defined does not."
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("#| default_exp io"),
                nbformat.v4.new_code_cell("#| export\ndef sha256(p): ..."),
                nbformat.v4.new_code_cell("sha256('x')  # an example")]
    p = tmp_path / "00_io.ipynb"
    nbformat.write(nb, p)
    module, names, shown = notebook_names(p)
    assert module == "io" and "sha256" in names and "read_jsonl" in names
    assert re.search(r"(?<![\w])sha256\b", shown) and "read_jsonl" not in shown


def test_one_definition_per_export_cell():
    "Each export cell holds at most one top-level function or class, so prose, example and test can sit beside it."
    import ast
    crowded = []
    for p in sorted(NBS.glob("*.ipynb")):
        for i, c in enumerate(nbformat.read(p, as_version=4).cells):
            if c.cell_type != "code" or not _export_dirs(c.source) & {"export", "exports", "exporti"}:
                continue
            body = ast.parse(c.source).body
            n = sum(isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for x in body)
            if n > 1:
                crowded.append(f"{p.name} cell {i}: {n} definitions")
    assert not crowded, crowded


def test_docstrings_stand_alone():
    "A docstring is read in `help()` and the exported module, away from the notebook prose: no 'see above'."
    import toolpaper
    import pkgutil
    bad = []
    for m in pkgutil.iter_modules(toolpaper.__path__):
        mod = importlib.import_module(f"toolpaper.{m.name}")
        for name, obj in vars(mod).items():
            ours = getattr(obj, "__module__", None) == mod.__name__
            if not ours or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            docs = [obj.__doc__ or ""] + [getattr(v, "__doc__", "") or "" for v in vars(obj).values()
                                          if inspect.isclass(obj) and inspect.isfunction(v)]
            if any(re.search(r"\bsee (above|below)\b", d, re.I) for d in docs):
                bad.append(f"{mod.__name__}.{name}")
    assert not bad, bad


def _follow_ratio(paths) -> tuple[int, int, list[str]]:
    """(public definitions in export cells, those followed at once by an example that uses them, the others): the
    cell right after the definition is a code cell that is not exported and names it."""
    total, shown, missing = 0, 0, []
    for p in paths:
        cells = nbformat.read(p, as_version=4).cells
        for i, c in enumerate(cells):
            if c.cell_type != "code" or not _export_dirs(c.source) & {"export", "exports"}:
                continue
            names = re.findall(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z]\w*)", c.source, re.M)
            nxt = cells[i + 1] if i + 1 < len(cells) else None
            example = nxt is not None and nxt.cell_type == "code" and not _export_dirs(nxt.source)
            for n in names:
                total += 1
                if example and re.search(rf"\b{n}\b", nxt.source): shown += 1
                else: missing.append(f"{p.stem}:{n}")
    return total, shown, missing


EXAMPLE_RATIO = 0.60


def test_definitions_followed_by_examples():
    "At least 60% of the public definitions are followed at once by an example using them (the nbdev house style)."
    total, shown, missing = _follow_ratio(sorted(NBS.glob("*.ipynb")))
    assert total > 0 and shown / total >= EXAMPLE_RATIO, (
        f"{shown} of {total} public definitions ({shown / total:.0%}) are followed at once by their example; "
        f"{EXAMPLE_RATIO:.0%} needed. Without one: {missing[:40]}")


def test_follow_ratio_counts(tmp_path):
    "The counter: a definition with its example right after counts, one followed by another definition does not."
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("#| export\ndef shown(): ..."),
                nbformat.v4.new_code_cell("shown()"),
                nbformat.v4.new_code_cell("#| export\ndef alone(): ..."),
                nbformat.v4.new_code_cell("#| export\ndef _helper(): ..."),
                nbformat.v4.new_code_cell("#| export\ndef elsewhere(): ..."),
                nbformat.v4.new_code_cell("something_else()")]
    p = tmp_path / "x.ipynb"
    nbformat.write(nb, p)
    test = _follow_ratio([p])
    assert test == (3, 1, ["x:alone", "x:elsewhere"]), test


EXPORT_CELL_LINES = 65       # "no export cell over ~60 lines": a class goes on in @patch cells, a table in parts


def long_export_cells(paths) -> list[str]:
    "'notebook:first line (n lines)' of every export cell longer than EXPORT_CELL_LINES."
    out = []
    for p in paths:
        for c in nbformat.read(p, as_version=4).cells:
            n = len(c.source.splitlines())
            if c.cell_type == "code" and "export" in _export_dirs(c.source) and n > EXPORT_CELL_LINES:
                out.append(f"{p.stem}:{c.source.splitlines()[1][:50]} ({n} lines)")
    return out


def test_export_cells_are_short(tmp_path):
    "Every export cell reads as one unit: at most EXPORT_CELL_LINES lines (the counter itself checked on a toy)."
    assert not long_export_cells(sorted(NBS.glob("*.ipynb"))), long_export_cells(sorted(NBS.glob("*.ipynb")))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("#| export\ndef long():\n" + "    x = 1\n" * 70),
                nbformat.v4.new_code_cell("#| export\ndef short(): ...")]
    nbformat.write(nb, tmp_path / "t.ipynb")
    assert long_export_cells([tmp_path / "t.ipynb"]) == ["t:def long(): (72 lines)"]
