"""Benchmark: the strict parsers on 1 MB adversarial texts, beside the compat parsers (the authors' reading) and the
strict Seal-Tools reader as it was before its work bound (kept here, verbatim in behaviour, as the reference).

Target (issue 32): every parser <= 1 s on each 1 MB text; the 1 MB / 1 KB time ratio stays near linear (~1000x).
Run: .venv/bin/python benchmarks/parse_speed.py [--out reports/benchmarks] [--no-before]
"""
import argparse, ast, json, platform, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from toolpaper.parse import balanced_spans, fenced_blocks, parse_caller, parse_seal, parse_umi, _to_calls, _JSON_WORDS
from toolpaper.parse import _TRAILING_COMMA
from toolpaper.schema import MALFORMED


def families(n: int) -> dict[str, str]:
    return {
        "nested braces": "{" * (n // 2) + "}" * (n // 2),
        "nested lists": "[" * (n // 2) + "]" * (n // 2),
        "balanced brackets": "[{}]" * (n // 4),
        "name list": "[" + "a," * (n // 2) + "]",
        "python dict": "{" + "a: 1, " * (n // 6) + "}",
        "true words": "[" + "true, " * (n // 6) + "x]",
        "quotes": "'\"" * (n // 2),
        "one long call": '[{"api": "f", "parameters": {"q": "' + "x" * n + '"}}]',
    }


def _old_load(s):
    s = s.strip()
    for attempt in (s, _TRAILING_COMMA.sub(r"\1", s)):
        try: return json.loads(attempt)
        except MALFORMED: pass
        try: return ast.literal_eval(attempt)
        except MALFORMED: pass
        py = _JSON_WORDS.sub(lambda m: m.group(1) or {"true": "True", "false": "False", "null": "None"}[m.group(2)],
                             attempt)
        try: return ast.literal_eval(py)
        except MALFORMED: pass
    raise ValueError("neither")


def old_seal_strict(text):
    "The strict Seal-Tools reader before the bound: every span read in full, Python's parser on any length."
    cands = fenced_blocks(text) + [text]
    seen = set()
    for c in cands:
        for span in [c] + balanced_spans(c):
            if span in seen: continue
            seen.add(span)
            try: obj = _old_load(span)
            except ValueError: continue
            if _to_calls(obj): return True
    return False


def timed(f, text, reps=1):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); f(text); best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="reports/benchmarks")
    ap.add_argument("--no-before", action="store_true", help="skip the pre-bound reader (about a minute)")
    a = ap.parse_args()
    caller = lambda m: (lambda t: parse_caller("Action: f\nAction Input: " + t, m))
    umi = lambda m: (lambda t: parse_umi({"planner": "Next: caller.", "caller": "Action: f\nAction Input: " + t}, m))
    parsers = {"parse_seal compat": lambda t: parse_seal(t, "compat"),
               "parse_seal strict": lambda t: parse_seal(t, "strict"),
               "parse_caller compat": caller("compat"), "parse_caller strict": caller("strict"),
               "parse_umi compat": umi("compat"), "parse_umi strict": umi("strict")}
    if not a.no_before: parsers["parse_seal strict, before the bound (reference)"] = old_seal_strict
    small, big = families(1000), families(1_000_000)
    rows = []
    for fam in big:
        for name, f in parsers.items():
            t_small, t_big = timed(f, small[fam], 5), timed(f, big[fam])
            rows.append({"input": fam, "parser": name, "1 KB ms": round(1000 * t_small, 3), "1 MB s": round(t_big, 3),
                         "ratio": round(t_big / max(t_small, 1e-6))})
            print(f"{fam:18s} {name:50s} 1 KB {1000 * t_small:8.3f} ms  1 MB {t_big:7.3f} s", flush=True)
    now = [r for r in rows if "before" not in r["parser"]]
    worst = max(now, key=lambda r: r["1 MB s"])
    head = (f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}; each 1 KB "
            f"time is the best of 5, each 1 MB time one run. Slowest current parser on 1 MB: {worst['parser']} on "
            f"{worst['input']}, {worst['1 MB s']} s (target <= 1 s).")
    print(head)
    from toolpaper.metrics import df_markdown
    import pandas as pd
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    md = ("# Parsing speed on 1 MB adversarial text\n\nWritten by `benchmarks/parse_speed.py`. " + head +
          "\n\nThe reference rows are the strict Seal-Tools reader as it was before its work bound (every nested span "
          "read in full, Python's literal reader on any length).\n\n" + df_markdown(pd.DataFrame(rows)) + "\n")
    from _index import write_page
    write_page(out, "parse_speed", {"rows": rows}, md)


if __name__ == "__main__":
    main()
