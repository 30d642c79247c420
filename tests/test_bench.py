"""`toolpaper bench`: SIGKILL and resume, replay, a real `toolpaper serve` process evaluated over HTTP, bad input."""
import json, os, random, signal, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable)

WORKER = r"""
import hashlib, json, sys, time
from toolpaper.bench import BenchConfig, run_bench
from toolpaper.client import Client, Completion
class Slow(Client):
    "A deterministic stand-in model: a fixed answer per prompt, a quarter second each."
    model = "slow-fake"
    def _complete(self, items, progress=False):
        out = []
        for p, pre, par in items:
            time.sleep(0.25)
            h = hashlib.sha256(json.dumps([p, pre]).encode()).hexdigest()
            out.append(Completion('[{"api": "x%s", "parameters": {}, "responses": []}]' % h[:6], self.model))
        return out
cfg = BenchConfig("seal", split="dev", candidates="gold", prompt="toolpaper", chunk=1, n_boot=20, data_dir="sample")
run_bench(cfg, Slow(), sys.argv[1])
"""


def test_bench_killed_and_rerun_loses_and_repeats_nothing(tmp_path):
    ref = tmp_path / "uninterrupted"
    subprocess.run([str(EXE), "-c", WORKER, str(ref)], check=True, capture_output=True)
    out, rng, kills = tmp_path / "killed", random.Random(0), 0
    pred = out / "predictions.jsonl"
    n_lines = lambda: len(pred.read_bytes().splitlines()) if pred.exists() else 0
    # killed three times, each time just after (or while) new predictions are written; then run to the end
    for attempt in range(6):
        before = n_lines()
        p = subprocess.Popen([str(EXE), "-c", WORKER, str(out)], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        if kills < 3:
            t_end = time.time() + 120
            while p.poll() is None and n_lines() <= before and time.time() < t_end: time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL); p.wait(); kills += 1
                assert n_lines() > before
                continue
        p.wait(timeout=300)
        if p.returncode == 0: break
    else:
        raise AssertionError("the run never finished")
    assert kills == 3, "the test must interrupt the run after predictions were written"
    lines = (out / "predictions.jsonl").read_text().splitlines()
    ids = [json.loads(l)["id"] for l in lines]
    assert len(ids) == len(set(ids)) == 14                              # nothing repeated, nothing missing
    assert sorted(lines) == sorted((ref / "predictions.jsonl").read_text().splitlines())
    m, r = json.loads((out / "metrics.json").read_text()), json.loads((ref / "metrics.json").read_text())
    assert m["modes"] == r["modes"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args, env=None):
    return subprocess.run([str(EXE.with_name("toolpaper")), *map(str, args)], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    p = subprocess.Popen(
        [str(EXE.with_name("toolpaper")), "serve", "--model", "tiny-random-llama", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 180
    while time.time() < deadline:
        if p.poll() is not None: raise AssertionError(f"toolpaper serve exited: {p.stdout.read()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as r:
                if json.load(r)["data"][0]["id"] == "tiny-random-llama": break
        except OSError: time.sleep(0.5)
    else:
        p.kill(); raise AssertionError("toolpaper serve did not come up")
    yield url
    p.send_signal(signal.SIGINT)
    try: p.wait(timeout=20)
    except subprocess.TimeoutExpired: p.kill()


def _post(url, body: bytes | dict, timeout=60):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + "/chat/completions", raw, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r: return r.status, json.load(r)
    except urllib.error.HTTPError as e: return e.code, json.load(e)


def test_serve_refuses_bad_requests_at_once_and_keeps_answering(server):
    hi = [{"role": "user", "content": "Say hi"}]
    t0 = time.time()
    code, r = _post(server, {"model": "tiny-random-llama", "messages": hi, "max_tokens": 10**12})
    assert code == 400 and "the model's context is 8192 tokens" in r["error"]["message"], r
    assert time.time() - t0 < 10
    code, r = _post(server, {"model": "tiny-random-llama", "messages": [{"role": "wizard", "content": "x"}]})
    assert code == 400 and "'wizard'" in r["error"]["message"], r
    code, r = _post(server, b'{"model": "tiny-random-llama", "messages": [{"role": "user", "content": "x"}], '
                            b'"temperature": NaN}')
    assert code == 400 and "temperature" in r["error"]["message"], r
    code, r = _post(server, {"model": "tiny-random-llama", "messages": hi, "max_tokens": 4}, timeout=30)
    assert code == 200 and r["usage"]["completion_tokens"] <= 4


def test_serve_exits_promptly_and_cleanly_on_sigterm(tmp_path):
    """Requests in flight (16 long generations) do not hold a SIGTERM: the server stops accepting, gives them its
    grace period and exits 0."""
    import threading
    port = _free_port()
    cmd = [str(EXE.with_name("toolpaper")), "serve", "--model", "tiny-random-llama", "--port", str(port)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/models", timeout=2): break
        except OSError: time.sleep(0.5)
    body = {"model": "tiny-random-llama", "messages": [{"role": "user", "content": "Tell a long story"}],
            "max_tokens": 2000, "temperature": 1.0}
    answers = []
    ts = [threading.Thread(target=lambda: answers.append(_try_post(url, body)), daemon=True) for _ in range(16)]
    for t in ts: t.start()
    time.sleep(3)
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    try: rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill(); raise AssertionError("toolpaper serve ignored SIGTERM for 30 s")
    took = time.time() - t0
    assert rc == 0, p.stdout.read()[-2000:]
    assert took < 10, took


def _try_post(url, body):
    try: return _post(url, body, timeout=60)[0]
    except OSError as e: return type(e).__name__


@pytest.mark.parametrize(
    "suite,extra",
    [
        ("seal", ["--candidates", "gold", "--prompt", "toolpaper"]),
        ("deer", ["--api", "completions"]),
        ("gsm8k", ["--method", "cot", "--shots", "1"]),
    ],
)
def test_bench_over_http_against_toolpaper_serve_equals_local(server, tmp_path, suite, extra):
    """The same model through `toolpaper serve` and the HTTP client gives the local client's predictions (DEER:
    the released plain
    template over the completions endpoint, with stops and the second round's prefixes)."""
    common = [
        "--limit",
        "4",
        "--max-tokens",
        "10",
        "--data-dir",
        "sample",
        "--no-progress",
        *[e for e in extra if e not in ("--api", "completions")],
    ]
    api = ["--api", "completions"] if "--api" in extra else []
    r = _cli(
        "bench",
        suite,
        "--base-url",
        server,
        "--model",
        "tiny-random-llama",
        "--out",
        tmp_path / "http",
        *common,
        *api,
        env={**os.environ, "OPENAI_API_KEY": "sk-test"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    r = _cli("bench", suite, "--model", "tiny-random-llama", "--out", tmp_path / "local", *common)
    assert r.returncode == 0, r.stderr[-2000:]
    http = [json.loads(l) for l in (tmp_path / "http" / "predictions.jsonl").read_text().splitlines()]
    local = [json.loads(l) for l in (tmp_path / "local" / "predictions.jsonl").read_text().splitlines()]
    assert [x["output"] for x in http] == [x["output"] for x in local]
    assert json.loads((tmp_path / "http" / "config.json").read_text())["model"]["backend"] == "OpenAIClient"


def test_replay_reruns_a_bench_byte_for_byte_offline(tmp_path):
    # the sample has no released role layouts
    args = ["--limit", "3", "--max-tokens", "8", "--data-dir", "sample", "--no-progress", "--prompt", "toolpaper"]
    r = _cli("bench", "umi", "--split", "seal_heldout", "--model", "tiny-random-llama", "--out", tmp_path / "a", *args)
    assert r.returncode == 0, r.stderr[-2000:]
    r = _cli(
        "bench",
        "umi",
        "--split",
        "seal_heldout",
        "--replay",
        tmp_path / "a" / "requests.jsonl",
        "--out",
        tmp_path / "b",
        *args,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "a" / "predictions.jsonl").read_bytes() == (tmp_path / "b" / "predictions.jsonl").read_bytes()
    ma, mb = (json.loads((tmp_path / x / "metrics.json").read_text()) for x in "ab")
    assert ma["modes"] == mb["modes"]


@pytest.mark.parametrize(
    "args,expect",
    [
        (["bench", "seal", "--model", "m", "--split", "valid"], "unknown seal split 'valid'"),
        (["bench", "deer", "--replay", "{tmp}"], "is a folder"),
        (["bench", "deer", "--model", "tiny-random-llama", "--out", "{tmp}/file.txt"], "is a file"),
        (["eval", "seal", "--pred", "{tmp}", "--gold", "seal-tools:dev@sample"], "is a folder"),
        (
            ["eval", "seal", "--pred", "{tmp}/dup.jsonl", "--gold", "seal-tools:dev@sample"],
            "dup.jsonl:2: id: duplicate id 'dev-easy-0'",
        ),
        (["eval", "seal", "--pred", "{tmp}/nojson.jsonl", "--gold", "seal-tools:dev@sample"], "nojson.jsonl:2"),
        (["eval", "seal", "--pred", "{tmp}/noid.jsonl", "--gold", "seal-tools:dev@sample"], "noid.jsonl:1: id:"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, args, expect):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "dup.jsonl").write_text('{"id": "dev-easy-0", "output": ""}\n{"id": "dev-easy-0", "output": ""}\n')
    (tmp_path / "nojson.jsonl").write_text('{"id": "dev-easy-0", "output": ""}\n{oops\n{"id": "x"}\n')
    (tmp_path / "noid.jsonl").write_text('{"output": ""}\n')
    r = _cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and expect in r.stderr, r.stderr


TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTools:\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}<|im_end|>\n{% endif "
    "%}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_native_prompt_renders_tools_through_the_chat_template(tmp_path):
    from toolpaper.bench import BenchConfig, run_bench
    from toolpaper.client import LocalClient
    from toolpaper.models import load_model
    model, tok = load_model("tiny-random-llama")
    with pytest.raises(ValueError, match="chat template takes tools"):           # SmolLM2's template does not
        run_bench(BenchConfig("seal", prompt="native", candidates="gold", limit=2, max_tokens=4, data_dir="sample"),
                  LocalClient("tiny-random-llama", loaded=(model, tok)), tmp_path / "refused")
    tok.chat_template = TOOLS_TEMPLATE
    c = LocalClient("tiny-random-llama", loaded=(model, tok))
    seen = []
    inner = c.engine.generate
    c.engine.generate = lambda reqs, progress=False, **kw: (
        seen.extend(tok.decode(r.ids) for r in reqs),
        inner(reqs, progress, **kw),
    )[1]
    res = run_bench(
        BenchConfig("seal", prompt="native", candidates="gold", limit=2, max_tokens=4, data_dir="sample"),
        c,
        tmp_path / "native",
    )
    assert res["n_items"] == 2 and all('"type": "function"' in p and '"parameters"' in p for p in seen)


def test_export_openai_tools(tmp_path):
    r = _cli("data", "export", "--format", "openai-tools", "--to", tmp_path, "--data-dir", "sample")
    assert r.returncode == 0, r.stderr
    tools = json.loads((tmp_path / "seal-tools__tools.openai-tools.json").read_text())
    f = tools[0]["function"]
    assert (
        tools[0]["type"] == "function"
        and f["parameters"]["type"] == "object"
        and set(f["parameters"]["required"]) <= set(f["parameters"]["properties"])
    )


class _Counting:
    """A deterministic stand-in client that notes, at each call, how many predictions the run has saved so far."""
    def __new__(cls, pred_path):
        from toolpaper.client import Client, Completion

        class C(Client):
            model = "counting-fake"
            saved_at_call: list = []

            def _complete(self, items, progress=False):
                p = Path(pred_path)
                self.saved_at_call.append(len(p.read_text().splitlines()) if p.exists() else 0)
                self.usage.add(requests=len(items))
                return [Completion('[{"api": "x", "parameters": {}, "responses": []}]', self.model) for _ in items]

        return C()


def test_bench_saves_item_by_item_counts_usage_across_resumes_and_builds_only_bm25(tmp_path, monkeypatch):
    from toolpaper import models
    from toolpaper.bench import BenchConfig, run_bench
    monkeypatch.setattr(models, "load_embedder", lambda *a, **k: pytest.fail("BM25 candidates loaded an encoder"))
    out = tmp_path / "run"
    cfg = BenchConfig("seal", split="dev", candidates="bm25", prompt="toolpaper", limit=4, n_boot=10, data_dir="sample")
    assert cfg.chunk == 32
    client = _Counting(out / "predictions.jsonl")
    res = run_bench(cfg, client, out)
    assert client.saved_at_call == [0, 1, 2, 3]          # a record saved after every item, not once at the end
    assert res["usage"]["requests"] == 4
    lines = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text("\n".join(lines[:2]) + "\n")     # as if killed after two items
    res = run_bench(cfg, _Counting(out / "predictions.jsonl"), out)
    assert (res["usage_this_session"]["requests"], res["usage"]["requests"]) == (2, 6)
    assert json.loads((out / "usage.json").read_text())["sessions"] == 2


def test_constrained_bench_is_its_own_column_and_always_parses(tmp_path):
    """`toolpaper bench seal --constrained`: every answer decoded under its candidates' answer schema parses (the tiny
    random model's free answers do not), and the row says the run was constrained; without the flag nothing is."""
    rows = {}
    for flag in ([], ["--constrained"]):
        out = tmp_path / ("on" if flag else "off")
        r = subprocess.run([EXE, "-m", "toolpaper", "bench", "seal", "--model", "tiny-random-llama", "--data-dir",
                            "sample", "--candidates", "gold", "--prompt", "toolpaper", "--limit", "3",
                            "--max-tokens", "1200", "--out", str(out), "--no-progress", *flag],
                           capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-2000:]
        rows[bool(flag)] = json.loads((out / "metrics.json").read_text())
        assert json.loads((out / "config.json").read_text())["run"]["constrained"] is bool(flag)
    assert rows[True]["modes"]["compat"]["metrics"]["format_acc"] == 1.0
    assert rows[False]["modes"]["compat"]["metrics"]["format_acc"] < 1.0
    assert "constrained" in (tmp_path / "on" / "row.md").read_text()
