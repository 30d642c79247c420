"""Benchmark: `toolpaper serve` under load — 64 requests, a mix of valid and invalid ones, sent 8 at a time on
127.0.0.1, beside the same requests sent one at a time.

Valid requests are Seal-Tools test queries as chat messages (greedy, at most --max-tokens new tokens); invalid ones are
the kinds issue 32 found stalling or accepted: max_tokens 10**12, role "wizard", temperature NaN, max_tokens 0. The
target: every valid request answered (200), every invalid one refused (400) at once, and concurrent requests sharing
batches (higher throughput than one at a time).
Run: .venv/bin/python benchmarks/serve_load.py [--model smollm2-135m-instruct] [--n 64] [--concurrency 8]
     [--max-tokens 32] [--out reports/benchmarks]
"""
import argparse, json, os, platform, signal, socket, subprocess, sys, time, urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).parent))

BAD = [
    ("max_tokens 10**12", lambda m, q: {"model": m, "messages": q, "max_tokens": 10**12}),
    ("role 'wizard'", lambda m, q: {"model": m, "messages": [{"role": "wizard", "content": "x"}]}),
    ("temperature NaN", None),
    ("max_tokens 0", lambda m, q: {"model": m, "messages": q, "max_tokens": 0}),
]


def requests(model: str, n: int, max_tokens: int, offset: int = 0) -> list[tuple[str, bytes]]:
    """(kind, body) for n requests: every fourth one invalid (cycling through BAD), the rest Seal-Tools queries from
    `offset` on (each run gets queries of its own, so no run reads another's prefix cache)."""
    from toolpaper.data import load
    queries = [x.query for x in load("seal-tools:test_in_domain")]
    out = []
    for i in range(n):
        q = [{"role": "user", "content": queries[(offset + i) % len(queries)]}]
        if i % 4 == 3:
            kind, make = BAD[(i // 4) % len(BAD)]
            body = (b'{"model": "%s", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}'
                    % model.encode()) if make is None else json.dumps(make(model, q)).encode()
            out.append((kind, body))
        else:
            out.append(("valid", json.dumps({"model": model, "messages": q, "max_tokens": max_tokens}).encode()))
    return out


def post(url: str, body: bytes) -> tuple[int, float, int]:
    "(status, seconds, completion tokens) of one request."
    t0 = time.perf_counter()
    req = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            d = json.load(r); return r.status, time.perf_counter() - t0, d["usage"]["completion_tokens"]
    except urllib.error.HTTPError as e:
        e.read(); return e.code, time.perf_counter() - t0, 0


def run(url: str, reqs, concurrency: int) -> dict:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex: res = list(ex.map(lambda kb: post(url, kb[1]), reqs))
    wall = time.perf_counter() - t0
    valid = [r for (k, _), r in zip(reqs, res) if k == "valid"]
    bad = [r for (k, _), r in zip(reqs, res) if k != "valid"]
    lat = np.array([r[1] for r in valid]); blat = np.array([r[1] for r in bad])
    return {"concurrency": concurrency, "requests": len(reqs), "wall s": round(wall, 1),
            "valid answered": f"{sum(r[0] == 200 for r in valid)}/{len(valid)}",
            "invalid refused (400)": f"{sum(r[0] == 400 for r in bad)}/{len(bad)}",
            "valid req/s": round(len(valid) / wall, 2), "new tokens/s": round(sum(r[2] for r in valid) / wall, 1),
            "valid p50 s": round(float(np.percentile(lat, 50)), 2),
            "valid p95 s": round(float(np.percentile(lat, 95)), 2),
            "invalid p95 s": round(float(np.percentile(blat, 95)), 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", default="reports/benchmarks")
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("toolpaper")
    t0 = time.perf_counter()
    p = subprocess.Popen([str(exe), "serve", "--model", a.model, "--port", str(port)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    while True:
        if p.poll() is not None: sys.exit(f"toolpaper serve exited: {p.stdout.read()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2): break
        except OSError: time.sleep(0.5)
    up = time.perf_counter() - t0
    run(url, requests(a.model, 4, a.max_tokens, offset=2 * a.n), 1)     # warm-up: first-call costs out of both timings
    rows = [run(url, requests(a.model, a.n, a.max_tokens), a.concurrency),
            run(url, requests(a.model, a.n, a.max_tokens, offset=a.n), 1)]
    t1 = time.perf_counter(); p.send_signal(signal.SIGTERM); rc = p.wait(timeout=60); stop = time.perf_counter() - t1
    for r in rows: print(r)
    head = (f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; model "
            f"{a.model} (fp32, the local engine), at most {a.max_tokens} new tokens per valid request, greedy. "
            f"Server up in {up:.1f} s; SIGTERM after the runs: exit code {rc} in {stop:.1f} s.")
    print(head)
    import pandas as pd
    from toolpaper.metrics import df_markdown
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    md = (f"# toolpaper serve under load\n\nWritten by `benchmarks/serve_load.py`. {head}\n\n{a.n} requests, one in "
          "four "
          "invalid (max_tokens 10^12, role 'wizard', temperature NaN, max_tokens 0, in turn), the rest Seal-Tools "
          "test_in_domain queries as chat messages; first row sent "
          f"{a.concurrency} at a time, second row as many requests of the same mix one at a time (the next {a.n} "
          "queries, so neither row reads the other's prefix cache), to the same server after a 4-request warm-up. "
          "Latency is per request, from sending to the whole answer.\n\n" + df_markdown(pd.DataFrame(rows)) + "\n")
    from _index import write_page
    write_page(out, "serve_load", {"setup": head, "rows": rows}, md)


if __name__ == "__main__":
    main()
