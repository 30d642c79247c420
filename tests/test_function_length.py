"""No function in the package over 60 lines (issue 33): the ones still longer are listed with their length, and the
list may only shrink — a new long function, a listed one that grew, or one that is now short enough and still listed
fails this test."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60
# module.function: its length today (empty since issue 33 split the experiments into stages; keep it so).
STILL_LONG: dict[str, int] = {}


def function_lengths() -> dict[str, int]:
    "{module.function: lines} of every function and method in toolpaper/ (the longest, when a name repeats)."
    out: dict[str, int] = {}
    for p in sorted((ROOT / "toolpaper").glob("*.py")):
        if p.name == "_modidx.py": continue
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{p.stem}.{n.name}"
                out[key] = max(out.get(key, 0), n.end_lineno - n.lineno + 1)
    return out


def test_no_function_over_60_lines_beyond_the_shrinking_list():
    lengths = function_lengths()
    new = {k: v for k, v in lengths.items() if v > LIMIT and k not in STILL_LONG}
    grew = {k: (STILL_LONG[k], lengths.get(k)) for k in STILL_LONG if lengths.get(k, 0) > STILL_LONG[k]}
    done = [k for k in STILL_LONG if lengths.get(k, 0) <= LIMIT]
    assert not new, f"functions over {LIMIT} lines: {new}"
    assert not grew, f"listed long functions grew (listed, now): {grew}"
    assert not done, f"now within {LIMIT} lines: remove {done} from STILL_LONG"
