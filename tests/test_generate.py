"""Crash safety of generation stages: SIGKILL at random moments, restart, no lost and no duplicated records."""
import json, random, signal, subprocess, sys, time

WORKER = r'''
import sys, time
from toolpaper.generate import run_stage
def slow(i):
    time.sleep(0.01)
    return {"value": i * 3, "text": "x" * (i % 50)}
run_stage(sys.argv[1], [(f"item-{i}", i) for i in range(int(sys.argv[2]))], slow)
'''


def test_sigkill_restart_loses_and_duplicates_nothing(tmp_path):
    out, n = tmp_path / "stage.jsonl", 400
    rng = random.Random(0)
    # start-up time on this machine (imports), so every kill lands inside the stage's work: the fastest of three, since
    # one slowed by other work would open a window in which the whole stage finishes before any kill
    boots = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import toolpaper.generate"], check=True)
        boots.append(time.perf_counter() - t0)
    boot = min(boots)
    kills = 0
    for attempt in range(200):
        p = subprocess.Popen([sys.executable, "-c", WORKER, str(out), str(n)], stderr=subprocess.DEVNULL)
        try:
            # the window grows with the attempts: on a loaded machine (start-up slower than measured) the stage still
            # gets far enough between kills to finish, and the early kills land inside its work
            p.wait(timeout=boot * (1 + attempt / 25) + rng.uniform(0.1, 0.7))
            if p.returncode == 0: break
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL); p.wait(); kills += 1
    else:
        raise AssertionError("never finished")
    assert kills >= 2, "the test must actually interrupt the stage"
    lines = out.read_text().splitlines()
    keys = [json.loads(l)["key"] for l in lines]
    assert len(keys) == len(set(keys)) == n
    assert {json.loads(l)["value"] for l in lines} == {3 * i for i in range(n)}


# --- the whole self-instruct pipeline -------------------------------------------------------------------------

from toolpaper.data import load, read_deer_tools, read_seal_instances, read_seal_tools
from toolpaper.generate import DeerGenConfig, SealGenConfig, generate_deer, generate_seal
from toolpaper.testing import OracleChat
from toolpaper.client import RecordReplay

CFG = dict(n_fields=3, subfields_per_field=2, tools_per_subfield=3, n_single=8, n_multi=4, dedup_threshold=0.95)
SEAL_FILES = ["seal-tools/tool.jsonl", "seal-tools/generated.jsonl", "seal-tools/provenance.jsonl", "yield.json"]
DEER_FILES = ["tooldeer/tool.json", "tooldeer/provenance.jsonl", "deer_yield.json"]


def oracle():
    return OracleChat(load("seal-tools:tools", "sample"), load("tooldeer:tools", "sample"))


def deer_seeds():
    return [
        {"api_name": t.name, "description_for_human": t.description, "description_for_model": t.model_description or ""}
        for t in load("tooldeer:tools", "sample")
    ]


def run_both(client, out):
    generate_seal(client, out, SealGenConfig(**CFG))
    generate_deer(client, deer_seeds(), out, DeerGenConfig())


def test_recorded_cache_replays_the_whole_pipeline_byte_for_byte(tmp_path):
    cache = tmp_path / "cache.jsonl"
    rec = RecordReplay(oracle(), cache, mode="record")
    run_both(rec, tmp_path / "recorded")
    assert rec.usage.requests > 20                       # (a prompt asked twice is a cache hit already while recording)
    rep = RecordReplay(None, cache, mode="replay", model=rec.model)
    run_both(rep, tmp_path / "replayed")
    assert rep.usage.requests == 0 and rep.usage.cache_hits == rec.usage.requests + rec.usage.cache_hits
    for f in SEAL_FILES + DEER_FILES:
        assert (tmp_path / "recorded" / f).read_bytes() == (tmp_path / "replayed" / f).read_bytes(), f
    tools = read_seal_tools(tmp_path / "replayed" / "seal-tools" / "tool.jsonl")
    insts = read_seal_instances(tmp_path / "replayed" / "seal-tools" / "generated.jsonl")
    assert len(tools) >= 4 and len(insts) == 12 and any(i.kind == "multiple" for i in insts)
    assert read_deer_tools(tmp_path / "replayed" / "tooldeer" / "tool.json")


PIPELINE_WORKER = r"""
import os, signal, sys, threading, time
from toolpaper.data import load
from toolpaper.generate import SealGenConfig, generate_seal
from toolpaper.testing import OracleChat
class Slow(OracleChat):
    def _complete(self, items, progress=False):
        time.sleep(0.2 * len(items))
        return super()._complete(items, progress)
c = Slow(load("seal-tools:tools", "sample"), load("tooldeer:tools", "sample"))
if float(sys.argv[2]) > 0:  # SIGKILL ourselves this many seconds after start-up: any moment of the run
    threading.Timer(float(sys.argv[2]), lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
# dedup_threshold=1.0: name de-duplication only, no encoder to load
cfg = SealGenConfig(n_fields=3, subfields_per_field=2, tools_per_subfield=3, n_single=8, n_multi=4, dedup_threshold=1.0,
                    chunk=2)
generate_seal(c, sys.argv[1], cfg)
os._exit(0)
"""


def test_pipeline_killed_and_restarted_gives_the_uninterrupted_output(tmp_path):
    clean = tmp_path / "clean"
    subprocess.run([sys.executable, "-c", PIPELINE_WORKER, str(clean), "0"], check=True, stderr=subprocess.DEVNULL)
    out, rng, kills = tmp_path / "killed", random.Random(1), 0
    progress = []
    for delay in [rng.uniform(0.4, 1.4) for _ in range(3)] + [0]:      # ~26 requests of 0.2 s: each timer hits mid-run
        r = subprocess.run([sys.executable, "-c", PIPELINE_WORKER, str(out), str(delay)], stderr=subprocess.DEVNULL)
        kills += r.returncode == -signal.SIGKILL
        progress.append(
            sum(len(p.read_text().splitlines()) for p in (out / "stages").glob("*.jsonl"))
            if (out / "stages").exists()
            else 0
        )
    assert kills >= 2, "the test must actually interrupt the pipeline"
    assert progress == sorted(progress) and max(progress[:-1]) > 0     # restarts keep what the killed runs had finished
    for f in SEAL_FILES:
        assert (clean / f).read_bytes() == (out / f).read_bytes(), f
    for stage in (out / "stages").glob("*.jsonl"):
        keys = [json.loads(l)["key"] for l in stage.read_text().splitlines()]
        assert len(keys) == len(set(keys)), stage


# --- faults from an OpenAI-compatible server ------------------------------------------------------------------

import hashlib, http.server, threading
from toolpaper.client import OpenAIClient

FAULTS = ["429", "500", "slow", "truncated", "nonjson"]


def fault_of(prompt: str) -> str | None:
    """Deterministic fault script per prompt: ~1 in 3 prompts fail once (one of FAULTS); single-tool prompts about
    bookings always fail."""
    if prompt.startswith("Here is an API and one call of it:") and '"api_name": "book' in prompt: return "always500"
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    return FAULTS[h % len(FAULTS)] if h % 3 == 0 else None


class OracleServer(http.server.BaseHTTPRequestHandler):
    oracle = None
    seen: dict = {}
    lock = threading.Lock()

    def log_message(self, *a): pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        with self.lock:
            n = self.seen[prompt] = self.seen.get(prompt, 0) + 1
        fault = fault_of(prompt)
        first = n == 1
        if fault == "always500" or (fault == "500" and first): return self._send(500, b'{"error": {"message": "boom"}}')
        if fault == "429" and first: return self._send(429, b'{"error": {"message": "slow down"}}')
        if fault == "slow" and first: time.sleep(1.5)
        ok = {
            "id": "x",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.oracle.answer(prompt)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        raw = json.dumps(ok).encode()
        if fault == "truncated" and first: raw = raw[: len(raw) // 2]
        if fault == "nonjson" and first: raw = b"<html>gateway hiccup</html>"
        self._send(200, raw)

    def _send(self, code, raw):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers(); self.wfile.write(raw)


def test_pipeline_over_a_faulty_server_counts_retries_and_rejections(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    OracleServer.oracle, OracleServer.seen = oracle(), {}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OracleServer)
    srv.handle_error = lambda *a: None                 # the client hanging up on a slow reply is part of the script
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        def stub_client(**kw):
            return OpenAIClient("stub", base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1", timeout=1.0,
                                max_retries=2, backoff=0.01, jitter=0.1, max_wait=0.02, seed=0, **kw)
        c = stub_client(prices=(1.0, 1.0))
        res = generate_seal(c, tmp_path / "faulty", SealGenConfig(**CFG))
        generate_seal(OracleChat(load("seal-tools:tools", "sample")), tmp_path / "clean", SealGenConfig(**CFG))
        seen_first = dict(OracleServer.seen)
        c2 = stub_client()
        # a restart asks only the failed requests again
        generate_seal(c2, tmp_path / "faulty", SealGenConfig(**CFG))
    finally:
        srv.shutdown(); srv.server_close()
    asked_again = {p: n - seen_first.get(p, 0) for p, n in OracleServer.seen.items() if n != seen_first.get(p, 0)}
    OracleServer.seen = seen_first
    prompts = list(OracleServer.seen)
    transient = [p for p in prompts if fault_of(p) in FAULTS]
    permanent = [p for p in prompts if fault_of(p) == "always500"]
    assert transient and permanent, "the fault script must hit this run"
    failed = sum(OracleServer.seen[p] for p in permanent) // 3            # each failed request made 1 + 2 retries
    u = c.usage
    assert u.failures == failed >= 1
    # an identical prompt asked again succeeds at once (the stub faults once per prompt)
    assert u.retries == len(transient) + 2 * failed
    assert u.requests == sum(OracleServer.seen.values()) == u.retries + (u.requests - u.retries)
    ok = u.requests - u.retries - failed
    assert (u.prompt_tokens, u.completion_tokens) == (10 * ok, 5 * ok)
    y = res.yields.set_index("stage")
    # failed for good: recorded, not parsed
    assert y.loc["single", "requested"] - y.loc["single", "parsed"] == failed
    # everything that did not fail for good is exactly what a fault-free run produces
    clean = [json.loads(l) for l in (tmp_path / "clean" / "seal-tools" / "generated.jsonl").read_text().splitlines()]
    faulty = [json.loads(l) for l in (tmp_path / "faulty" / "seal-tools" / "generated.jsonl").read_text().splitlines()]
    assert len(faulty) == len(clean) - failed
    assert {x["query"] for x in faulty} <= {x["query"] for x in clean}
    # the restart: only the requests that failed for good were sent again (1 + 2 client retries each), and failed again
    assert set(asked_again) == set(permanent) and sum(asked_again.values()) == 3 * failed
    again = json.loads((tmp_path / "faulty" / "yield.json").read_text())["requests"]["single"]
    assert (again["failed"], again["given_up"], again["retried"]) == (failed, 0, 0)
    stage = [json.loads(l) for l in (tmp_path / "faulty" / "stages" / "single.jsonl").read_text().splitlines()]
    assert sorted(r["attempt"] for r in stage if not r["ok"]) == [1] * failed + [2] * failed
