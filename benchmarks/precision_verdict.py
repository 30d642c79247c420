"""Benchmark: the precision verdict on fine-tuned models. The same Seal-Tools and DEER test items are answered by a
fine-tuned model in each precision (fp32, bf16, int8, w8), through `toolpaper bench`'s suites; each task metric's
difference to fp32 comes with its paired 95% bootstrap interval (`toolpaper.claims.contrast`, the same items in every
precision), beside each precision's seconds per item. `toolpaper.precision.precision_verdict` picks the fastest
precision whose intervals all lie within +-2 points of fp32; `--save-verdict` keeps the pick for this machine, and the
engine's `auto` follows it from then on.

`--tasks` runs a subset (e.g. `deer`, where only the DEER adapter is trained): the page then says which tasks the
verdict read. A subset's verdict is kept (`--save-verdict`) only when it picks fp32: a precision outside the interval
on one task is out whatever the other shows, while one inside it on a subset may still fail the task not run.
Models: `--seal-model` a fine-tuned Seal-Tools model (default: the seal_tools experiment's, `reports/seal_tools/work/
adapter`, once trained there), `--deer-adapter` a DEER LoRA adapter over `--deer-base` (default: the deer experiment's
main adapter). Items: `--n` per task (the first of a seeded draw). Prints, and with --out writes,
`precision_verdict.md` / `.json` (a subset of the tasks: `precision_verdict_<tasks>.md`).
Run: python benchmarks/precision_verdict.py --n 100 --out reports/benchmarks [--save-verdict]
`--tiny` runs the same code on the tiny random Llama and the packaged sample (a check of the script; numbers mean
nothing).

`--train` gives the training verdict instead: the `deer` experiment's main adapter recipe (its examples, settings and
span labels, `toolpaper.deer.main_training`) trained in fp32 at `--fp32-seeds` training seeds (default 3) and in bf16
at `--bf16-seeds` (default 1) — an fp32 seed the experiment's stage cache holds is its own training (`--deer-work`;
`toolpaper reproduce --only deer --weights adapter_mixture_2-1-2` rebuilds its weights in a clone), every other run
trains here — each adapter answering the same `--n` DEER test items in fp32. bf16's difference to fp32 comes from a
two-level bootstrap (seeds, then items: the interval holds the seed-to-seed spread), beside the fp32 seeds' own spread,
every run's losses and training seconds; page `precision_verdict_train.md`. `--save-verdict` keeps it (when
`keepable`) for `train_bf16`.
Run: python benchmarks/precision_verdict.py --train --n 100 --out reports/benchmarks [--save-verdict]

`--keep reports/benchmarks/PAGE.json` keeps the verdict of an earlier run (generation or training) for `auto` without
answering again, when that run measured this machine kind and its verdict is `keepable`.
"""
import argparse, os, platform, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _index import write_page  # noqa: E402

# task -> (split, suite options, the metrics the verdict reads)
TASKS = {"seal": ("test_in_domain", {"candidates": "gold"}, ("format_acc", "tool.f1", "param.f1")),
         "deer": ("test", {}, ("p_nocall", "p_call", "p_dc"))}


_SPLITS = {"seal": "Seal-Tools `test_in_domain` (gold candidates)", "deer": "DEER `test`"}
_MODEL = {"seal": "Seal-Tools model", "deer": "DEER adapter"}
_NAME = {"seal": "Seal-Tools", "deer": "DEER"}


def answer(task: str, model: str, adapter, precision: str, n: int, data_dir, work: Path, max_tokens,
           prompt: str = "released", tag: str = "") -> dict:
    """One task in one precision, prompts in layout `prompt` (the experiments' is the authors'): {'items': {mode:
    per-item scores}, 'seconds_per_item', 'precision' (as resolved), 'n'}."""
    from toolpaper.bench import BenchConfig, bench_items, read_predictions, run_bench
    from toolpaper.client import LocalClient
    from toolpaper.metrics import score
    split, opts, _ = TASKS[task]
    cfg = BenchConfig(task, split, limit=n, data_dir=data_dir, n_boot=0, max_tokens=max_tokens, prompt=prompt,
                      **opts)
    client = LocalClient(model, adapter, batch_size=8, precision=precision)
    out = work / f"{task}-{precision}{tag}"
    res = run_bench(cfg, client, out)
    recs, items = read_predictions(out / "predictions.jsonl")[0], bench_items(cfg)
    done = res["predicted_this_session"]
    return {"items": {m: score(task, recs, items, m, n_boot=0).items for m in ("compat", "strict")},
            "seconds_per_item": res["seconds_this_session"] / done if done else None, "precision": client.precision,
            "n": len(items)}


def keepable(tasks, verdict: dict) -> str | None:
    """Why `verdict`, read on `tasks`, may not be kept for `auto` (None: it may): a verdict on every task may; one on a
    subset only when it picks fp32 (every reduced precision it ran already fell outside the interval on some task)."""
    if set(tasks) == set(TASKS) or verdict["pick"] == "fp32": return None
    return (f"read on {', '.join(tasks)} only, it picks {verdict['pick']}, which the tasks not run "
            f"({', '.join(t for t in TASKS if t not in tasks)}) may still rule out")


def contrasts(runs: dict, mode: str = "compat", n_boot: int = 2000) -> list[dict]:
    """Verdict rows: per precision, each task metric's difference to fp32 in points with its paired interval, and the
    seconds per item over both tasks."""
    from toolpaper.claims import contrast
    rows = []
    for p, by_task in runs.items():
        metrics = {}
        for task, r in by_task.items():
            for m in TASKS[task][2]:
                c = contrast(task, [(1, r["items"][mode]), (-1, runs["fp32"][task]["items"][mode])], m, mode,
                             n_boot=n_boot)
                pts = lambda v: None if v is None else round(100 * v, 2)
                metrics[f"{task} {m}"] = (pts(c["value"]), pts(c["low"]), pts(c["high"]))
        secs = [r["seconds_per_item"] for r in by_task.values()]
        rows.append({"precision": p, "seconds": sum(secs) / len(secs) if None not in secs else float("inf"),
                     "seconds by task": {t: r["seconds_per_item"] for t, r in by_task.items()}, "metrics": metrics})
    return rows


def _shown(path: str) -> str:
    "A model or adapter as the page names it: relative to the repository when it lies inside, else as given."
    p = Path(path)
    if not p.is_absolute(): return path
    try: return str(p.resolve().relative_to(ROOT))
    except ValueError: return path


def _verdict_table(heads: list[str], lead, rows: list[dict], v: dict) -> list[str]:
    """A verdict table's markdown lines: columns `heads` (a row's cells: `lead(row)`), each metric's difference with
    its interval, and whether the row's precision is eligible."""
    names = list(rows[0]["metrics"])
    cell = lambda t: "–" if t[0] is None else f"{t[0]:+.1f} [{t[1]:+.1f}, {t[2]:+.1f}]"
    out = ["| " + " | ".join(heads + names) + " | eligible |",
           "|:--|" + "--:|" * (len(heads) - 1 + len(names)) + ":--|"]
    for r in rows:
        out.append("| " + " | ".join(lead(r) + [cell(r["metrics"][m]) for m in names])
                   + f" | {'yes' if r['precision'] in v['eligible'] else 'no'} |")
    return out


def page(res: dict) -> str:
    v, rows = res["verdict"], res["rows"]
    left = [t for t in TASKS if t not in res["models"]]
    only = f" ({', '.join(_NAME[t] for t in res['models'])} only)" if left else ""
    lines = [
        f"# Precision verdict on fine-tuned models{only}",
        "",
        f"Scale: {res['n']} {' and '.join(_SPLITS[t] for t in res['models'])} items per precision, the same items in "
        f"each; {'; '.join(f'{_MODEL[t]} `{m}`' for t, m in res['models'].items())}; {res['machine']['cpu']}, "
        f"{res['machine']['threads']} threads, torch {res['machine']['torch']}, load "
        f"{res['load']} at the start. Differences to fp32 in points (compat counting) with paired 95% bootstrap "
        f"intervals; a precision is eligible when every interval lies within ±{v['tolerance']:g} points.",
        "",
    ]
    fmt = lambda x: "–" if x is None else f"{x:.2f}"
    lines += _verdict_table(["precision", "s / item (Seal-Tools)", "s / item (DEER)"],
                            lambda r: [r["precision"], fmt(r["seconds by task"].get("seal")),
                                       fmt(r["seconds by task"].get("deer"))], rows, v)
    lines += [x for p, why in res.get("skipped", {}).items() for x in ("", f"{p}: {why}.")]
    if left:
        lines += ["", f"Only {', '.join(_NAME[t] for t in res['models'])} answered: "
                      f"{', '.join(_NAME[t] for t in left)} was not run, so a reduced precision this verdict finds "
                      "eligible may still fail there; one it finds outside the interval is out (`keepable`)."]
    lines += ["", f"**Verdict{' on these tasks' if left else ''}: {v['pick']}.** {v['why']}"]
    return "\n".join(lines)


def train_runs(deer_work: Path, work: Path, data_dir, profile: str, seeds: dict | None = None, log=print) -> dict:
    """The DEER experiment's main adapter recipe (its examples, settings and span labels: `deer.main_training`) in fp32
    and bf16 at several training seeds (`seeds`: {precision: how many}, default fp32 3, bf16 1; seeds count up from
    the experiment's): {precision: [{'seed', 'folder', 'log', 'key', 'source'}]}. An fp32 seed the experiment trained
    (`deer_work` holds its log and weights under the same key) is reused, nothing trained; every other run trains
    through a stage cache under `work` (a rerun reuses it, one cut off resumes from its last checkpoint)."""
    import json
    from dataclasses import replace
    from toolpaper import data as D, deer as DE
    from toolpaper.report import profile_data_root
    from toolpaper.stages import StageCache, holds_stage, train_key
    root = profile_data_root(profile, data_dir)
    cfg = DE.DeerExpConfig.for_profile(profile)
    tools, valid, test = (D.load(f"tooldeer:{s}", root) for s in ("tools", "valid", "test"))
    out = {"model": cfg.model}
    for p, k in (seeds or {"fp32": 3, "bf16": 1}).items():
        out[p] = []
        for s in range(cfg.seed, cfg.seed + k):
            ex, run, spans = DE.main_training(tools, valid, test, cfg, deer_work, train_seed=s)
            cfg_p = replace(run, bf16=p == "bf16")
            key = train_key(cfg.model, None, ex, cfg_p, spans)
            own = Path(run.output_dir)
            committed = deer_work / "stages" / "train" / f"{own.name}-{key}.json"
            if committed.exists() and holds_stage(own, key):
                out[p].append({"seed": s, "folder": own, "log": json.loads(committed.read_text()), "key": key,
                               "source": f"the deer experiment's stage cache (key {key})"})
                continue
            folder = work / f"train-{p}" if s == cfg.seed else work / f"train-{p}-seed{s}"
            log(f"the recipe in {p} at seed {s} ({len(ex)} examples): {folder}")
            with StageCache(work) as sc:
                rec = sc.train(cfg.model, ex, replace(cfg_p, output_dir=str(folder)), span_labels=spans)
                sc.materialize(folder)                      # its weights, for the answers below
            out[p].append({"seed": s, "folder": folder, "log": rec, "key": key,
                           "source": f"trained by this benchmark (key {key})"})
        out["n_examples"] = len(ex)
    return out


def scores(items: list[dict], mode: str = "compat") -> dict:
    "Each DEER metric of the verdict over `items` (per-item scores), in points (None where undefined)."
    from toolpaper.claims import contrast
    v = {m: contrast("deer", [(1, items)], m, mode, n_boot=1)["value"] for m in TASKS["deer"][2]}   # the value only
    return {f"deer {m}": None if x is None else round(100 * x, 2) for m, x in v.items()}


def seeded_rows(items: dict, n_boot: int = 2000, mode: str = "compat") -> tuple[list[dict], dict]:
    """Verdict rows from per-item scores at several training seeds (`items`: {precision: [items per seed]}): each
    precision's difference to fp32 from a two-level bootstrap (seeds, then items within each seed:
    `claims.seeded_contrast`), so the interval holds the seed-to-seed spread; and the fp32 seeds against each other
    ({metric: {'per seed', 'sd', 'spread'}}: every seed's score, their sd and the largest gap between two seeds, in
    points) — how far two trainings of the same recipe in the same precision land apart."""
    import numpy as np
    from toolpaper.claims import seeded_contrast
    pts = lambda v: None if v is None else round(100 * v, 2)
    rows, ref = [], items["fp32"]
    for p, per_seed in items.items():
        metrics = {}
        for m in TASKS["deer"][2]:
            c = seeded_contrast("deer", [(1, per_seed), (-1, ref)], m, mode, n_boot=n_boot)
            metrics[f"deer {m}"] = (0.0, 0.0, 0.0) if p == "fp32" else (pts(c["value"]), pts(c["low"]), pts(c["high"]))
        rows.append({"precision": p, "metrics": metrics, "seeds": len(per_seed)})
    spread, per = {}, [scores(it, mode) for it in ref]
    for m in per[0]:
        vals = [x[m] for x in per]
        ok = [v for v in vals if v is not None]
        spread[m] = {"per seed": vals, "sd": round(float(np.std(ok, ddof=1)), 2) if len(ok) > 1 else None,
                               "spread": round(max(ok) - min(ok), 2) if len(ok) > 1 else None}
    return rows, spread


def loss_summary(log: dict) -> dict:
    "Mean training loss over every logged step and over the last fifth of them."
    losses = [h["loss"] for h in log.get("history", []) if "loss" in h and "step" in h]
    tail = losses[-max(1, len(losses) // 5):] if losses else []
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    return {"steps logged": len(losses), "mean loss": mean(losses), "mean loss, last fifth": mean(tail)}


def loss_steps(a: dict, b: dict) -> dict:
    "Log `b`'s losses against `a`'s at the steps both logged: the median relative difference, steps within 10%."
    from toolpaper.stages import loss_differences
    rel = loss_differences(a, b)
    if not rel: return {"steps": 0}
    return {"steps": len(rel), "median relative difference": rel[len(rel) // 2],
            "within 10%": sum(r <= 0.1 for r in rel) / len(rel)}


def _loss_cell(log: dict) -> tuple[str, str]:
    f = lambda x: "–" if x is None else f"{x:.4f}"
    L = loss_summary(log)
    return f(L["mean loss"]), f(L["mean loss, last fifth"])


def margin_reading(rows: list[dict], spread: dict, tolerance: float) -> str:
    """What the training verdict can and cannot say, in words: per reduced precision, the metrics whose interval holds
    zero (not shown different) and those that exclude it (shown different); and the metrics where the fp32 seeds alone
    land further apart than the margin — there no precision can be shown within it at this n, so fp32 stays because
    the other is not shown equivalent, not because it was shown worse. '' with one fp32 seed (spread unmeasured)."""
    from toolpaper.claims import seed_noise
    f = lambda x: f"{x:.1f}"
    wide = [(m, d["spread"]) for m, d in spread.items() if d["spread"] is not None and d["spread"] > tolerance]
    if not any(d["spread"] is not None for d in spread.values()): return ""
    out, ref_seeds = [], next((r.get("seeds", 1) for r in rows if r["precision"] == "fp32"), 1)
    for r in rows:
        if r["precision"] == "fp32": continue
        iv = {m: v for m, v in r["metrics"].items() if None not in v}
        held = [m for m, (_, lo, hi) in iv.items() if lo <= 0 <= hi]
        noise = {m: seed_noise(spread[m].get("sd"), [r.get("seeds", 1), ref_seeds]) for m in iv}
        apart = [f"{m} [{lo:+.1f}, {hi:+.1f}]" for m, (d, lo, hi) in iv.items()
                 if not lo <= 0 <= hi and (noise[m] is None or abs(d) > noise[m])]
        within = [f"{m} ({d:+.1f}, seed noise ±{noise[m]:.1f})" for m, (d, lo, hi) in iv.items()
                  if not lo <= 0 <= hi and noise[m] is not None and abs(d) <= noise[m]]
        out.append(f"{r['precision']}'s interval holds zero on {', '.join(held) or 'no metric'} (not shown different "
                   "from fp32 there)" + (f"; it excludes zero on {', '.join(apart)} (shown different)" if apart
                                          else "")
                   + (f"; it excludes zero on {', '.join(within)}, but while an arm has fewer than 3 seeds a "
                      "difference within 1.96 · sd · √(1/k + 1/k_fp32) (sd: the fp32 seeds') is not shown different"
                      if within else "") + ".")
    if wide:
        out.append(f"The fp32 seeds alone land further apart than ±{tolerance:g} points on "
                   + ", ".join(f"{m} (largest gap {f(g)})" for m, g in wide)
                   + ": at this n and scale no precision can be shown within the margin on those metrics, so training "
                   "stays in fp32 because the other precision is not shown equivalent — not because it was shown "
                   "worse where its interval holds zero.")
    return " ".join(out)


def train_page(res: dict) -> str:
    v, rows, spread = res["verdict"], res["rows"], res["seed_spread"]
    k = {p: len(r) for p, r in res["runs"].items()}
    lines = [
        "# Training precision verdict (DEER adapter)",
        "",
        f"Scale: the `deer` experiment's main adapter recipe (mixture 2:1:2, {res['n_examples']} training examples, "
        f"LoRA as in the experiment) trained in fp32 at {k['fp32']} seed(s) and in bf16 (autocast over fp32 master "
        f"weights) at {k['bf16']} seed(s) on {res['machine']['cpu']}, {res['machine']['threads']} threads, torch "
        f"{res['machine']['torch']}; load {res['load']} when this run started. Each adapter answers the same "
        f"{res['n']} DEER `test` items with fp32 generation. Differences of bf16 to fp32 in points (compat counting): "
        "each precision's mean over its seeds, with a 95% interval from a two-level bootstrap (the seeds resampled, "
        "then the items within each seed, paired), so the interval holds the seed-to-seed spread as well as the "
        f"items'. bf16 training is eligible when every interval lies within ±{v['tolerance']:g} points.",
        "",
        "## Runs",
        "",
        "| trained in | seed | training s | mean loss | mean loss, last fifth | " +
        " | ".join(spread) + " | source |",
        "|:--|--:|--:|--:|--:|" + "--:|" * len(spread) + ":--|",
    ]
    for p, runs in res["runs"].items():
        for r in runs:
            sc = " | ".join("–" if x is None else f"{x:.1f}" for x in r["scores"].values())
            lines.append(f"| {p} | {r['seed']} | {r['train_seconds']:.0f} | " + " | ".join(_loss_cell(r["log"]))
                         + f" | {sc} | {r['source']} |")
    lines += ["", "## How far the fp32 seeds land apart", "",
              "The same recipe in the same precision, trained at different seeds, answering the same items: the sd "
              "across seeds and the largest gap between two of them, in points. A bf16 difference no larger than "
              "this spread is not evidence that bf16 training changes the model.", "",
              "| metric | fp32 per seed | sd | largest gap |", "|:--|:--|--:|--:|"]
    f = lambda x: "–" if x is None else f"{x:.1f}"
    for m, d in spread.items():
        lines.append(f"| {m} | {', '.join(f(x) for x in d['per seed'])} | {f(d['sd'])} | {f(d['spread'])} |")
    lines += ["", "## Verdict", ""]
    lines += _verdict_table(["trained in", "seeds", "training s (mean)"],
                            lambda r: [r["precision"], str(r["seeds"]), f"{r['seconds']:.0f}"], rows, v)
    st = res["loss_steps"]
    if st["steps"]:
        lines += ["", f"The first bf16 run against the first fp32 one at each of their {st['steps']} logged steps: the "
                      f"loss differs by a median {100 * st['median relative difference']:.1f}% (relative), and by at "
                      f"most 10% at {100 * st['within 10%']:.0f}% of the steps."]
    if k["fp32"] < 2:
        lines += ["", "With one fp32 seed the interval cannot hold the seed-to-seed spread: a difference here may be "
                      "training noise (`--fp32-seeds` 3 measures it)."]
    lines += ["", f"**Verdict: train in {v['pick']}.** {v['why']}"]
    reading = margin_reading(rows, spread, v["tolerance"])
    lines += ["", reading] if reading else []
    return "\n".join(lines)


def train_main(a) -> dict:
    "`--train`: the training verdict (see the module's text)."
    from toolpaper.precision import machine_key, precision_verdict, save_verdict
    work = Path(a.work or tempfile.mkdtemp(prefix="train_verdict_"))
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    profile, n, data_dir = ("smoke", min(a.n, 3), "sample") if a.tiny else ("cpu", a.n, a.data_dir)
    deer_work = work / "deer" if a.tiny else Path(a.deer_work)
    tr = train_runs(deer_work, work, data_dir, profile, {"fp32": a.fp32_seeds, "bf16": a.bf16_seeds})
    limit, prompt = (8, "toolpaper") if a.tiny else (96, "released")
    items, runs = {}, {}
    for p in ("fp32", "bf16"):
        items[p], runs[p] = [], []
        for r in tr[p]:
            tag = f"-{p}-trained" + ("" if r["seed"] == tr[p][0]["seed"] else f"-seed{r['seed']}")
            got = answer("deer", tr["model"], str(r["folder"]), "fp32", n, data_dir, work, limit, prompt, tag=tag)
            items[p].append(got["items"]["compat"])
            runs[p].append({"seed": r["seed"], "source": r["source"], "log": r["log"],
                            "train_seconds": r["log"]["train_seconds"]})
    rows, spread = seeded_rows(items, n_boot=200 if a.tiny else 2000)
    for r in rows:
        r["seconds"] = sum(x["train_seconds"] for x in runs[r["precision"]]) / len(runs[r["precision"]])
    for p in runs:
        for x, it in zip(runs[p], items[p]):
            x["scores"] = scores(it)
    verdict = precision_verdict(rows, unit="s of training")
    res = {"kind": "training", "verdict": verdict, "rows": rows, "seed_spread": spread, "runs": runs, "n": n,
           "tiny": a.tiny, "load": load, "machine": machine_key(), "python": platform.python_version(),
           "n_examples": tr["n_examples"], "loss_steps": loss_steps(tr["fp32"][0]["log"], tr["bf16"][0]["log"])}
    md = train_page(res)
    print(md)
    if a.save_verdict and not a.tiny:
        why = keepable(["deer"], verdict)
        print("kept:", save_verdict(verdict, {"rows": rows, "n": n, "tasks": ["deer"], "seed_spread": spread,
                                            "page": "precision_verdict_train.md"}, kind="training")) \
            if why is None else print("not kept:", why)
    if a.out:
        for p in runs:
            for x in runs[p]: x.pop("log")                  # the page's .json: scores and seconds, not loss histories
        write_page(Path(a.out), "precision_verdict_train" + ("_tiny" if a.tiny else ""), res, md)
    return res


def keep_page(path: Path) -> dict:
    """`--keep`: keep the verdict an earlier run wrote (its page's `.json`) for `auto` on this machine, nothing
    answered again: only when that run measured this machine kind (`machine_key` equal), on the real models, and its
    verdict is `keepable`."""
    import json
    from toolpaper.precision import machine_key, save_verdict
    res = json.loads(Path(path).read_text())
    kind = res.get("kind", "generation")
    tasks = ["deer"] if kind == "training" else list(res["models"])
    if res.get("tiny"): sys.exit(f"{path}: a --tiny run (its numbers mean nothing): not kept")
    if res["machine"] != machine_key():
        sys.exit(f"{path}: measured on {res['machine']}, not on this machine ({machine_key()}): run it here")
    why = keepable(tasks, res["verdict"])
    if why: sys.exit(f"{path}: not kept: {why}")
    saved = save_verdict(res["verdict"], {"rows": res["rows"], "n": res["n"], "tasks": tasks, "code": res.get("code"),
                                          "page": Path(path).with_suffix(".md").name}, kind=kind)
    print(f"kept the {kind} verdict ({res['verdict']['pick']}): {saved}")
    return res


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seal-model", default=str(ROOT / "reports/seal_tools/work/adapter"))
    ap.add_argument("--deer-base", default="smollm2-135m-instruct")
    ap.add_argument("--deer-adapter", default=str(ROOT / "reports/deer/work/adapter_mixture_2-1-2"))
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--tasks", default="seal,deer", help="the tasks answered (a subset is never kept for `auto`)")
    ap.add_argument("--precisions", default="fp32,bf16,int8,w8")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--work", default=None, help="folder of the runs' predictions (default: a new temporary one)")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--keep-slow", action="store_true", help="run bf16 and w8 even where this CPU emulates bf16")
    ap.add_argument("--save-verdict", action="store_true", help="keep the pick for this machine (`auto` follows it)")
    ap.add_argument("--train", action="store_true",
                    help="the training verdict: the DEER adapter's recipe trained in bf16 beside fp32")
    ap.add_argument("--fp32-seeds", type=int, default=3,
                    help="with --train: fp32 trainings at seeds counting up from the experiment's (its own reused)")
    ap.add_argument("--bf16-seeds", type=int, default=1, help="with --train: bf16 trainings, seeds as for fp32")
    ap.add_argument("--deer-work", default=str(ROOT / "reports/deer/work"),
                    help="with --train: the deer experiment's work folder (its fp32 training is reused from there)")
    ap.add_argument("--keep", default=None, metavar="PAGE_JSON",
                    help="keep an earlier run's verdict (its page's .json) for auto here, answering nothing again")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.keep: return keep_page(Path(a.keep))
    if a.train: return train_main(a)
    from toolpaper.precision import bf16_activations, cpu_bf16_fast, machine_key, precision_verdict, save_verdict
    precs = [p.strip() for p in a.precisions.split(",") if p.strip()]
    if "fp32" not in precs: precs.insert(0, "fp32")
    skipped = {}
    for p in [p for p in precs if bf16_activations(p)]:
        if not a.tiny and not a.keep_slow and not cpu_bf16_fast():
            # without native bf16 products bf16 runs emulated, slower than fp32: never the fastest eligible precision
            precs.remove(p)
            skipped[p] = ("not run: this CPU has no fast bf16 products (`cpu_bf16_fast`: no avx512_bf16 / AMX units, "
                          f"or a measured bf16 product under the required gain over fp32), so {p} runs emulated bf16 "
                          "and slower than fp32 — it cannot be the fastest eligible precision here "
                          "(`--keep-slow` runs it)")
    tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    bad = sorted(set(tasks) - set(TASKS))
    if bad or not tasks: sys.exit(f"--tasks {a.tasks!r}: expected some of {', '.join(TASKS)}")
    models = ({"seal": ("tiny-random-llama", None), "deer": ("tiny-random-llama", None)} if a.tiny else
              {"seal": (a.seal_model, None), "deer": (a.deer_base, a.deer_adapter)})
    models = {t: models[t] for t in tasks}
    data_dir, n = ("sample", min(a.n, 3)) if a.tiny else (a.data_dir, a.n)
    for task, (m, ad) in models.items():
        for path in (m, ad):
            if path and os.sep in path and not Path(path).exists():
                sys.exit(f"{task}: {path} does not exist; train the experiment first or pass --{task}-model/adapter")
    work = Path(a.work or tempfile.mkdtemp(prefix="precision_verdict_"))
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    # the experiments' answer limits (Seal-Tools 384, DEER 96 new tokens) and prompt layout; the sample has no
    # released Seal-Tools layout
    limits, prompt = ({"seal": 8, "deer": 8}, "toolpaper") if a.tiny else ({"seal": 384, "deer": 96}, "released")
    runs = {p: {t: answer(t, m, ad, p, n, data_dir, work, limits[t], prompt) for t, (m, ad) in models.items()}
            for p in precs}
    rows = contrasts(runs, n_boot=200 if a.tiny else 2000)
    verdict = precision_verdict(rows)
    res = {"verdict": verdict, "rows": rows, "skipped": skipped, "n": n, "tiny": a.tiny, "load": load,
           "machine": machine_key(),
           "python": platform.python_version(),
           "models": {t: _shown(m) + (f" + {_shown(ad)}" if ad else "") for t, (m, ad) in models.items()},
           "resolved": {p: {t: r["precision"] for t, r in by.items()} for p, by in runs.items()}}
    md = page(res)
    print(md)
    name = "precision_verdict" + ("_tiny" if a.tiny else "") + ("_" + "_".join(tasks) if len(tasks) < len(TASKS)
                                                                  else "")
    if a.save_verdict and not a.tiny:
        why = keepable(tasks, verdict)
        print("kept:", save_verdict(verdict, {"rows": rows, "n": n, "tasks": tasks, "page": f"{name}.md"})) \
            if why is None else \
            print("not kept:", why)
    if a.out: write_page(Path(a.out), name, res, md)   # a subset of the tasks gets its own page
    return res


if __name__ == "__main__":
    main()
