"""toolpaper's client against a server it did not write (issue 75): llama-cpp-python's OpenAI-compatible server on the
shipped SmolLM2 GGUF. Runs where `llama_cpp` imports (the running environment, or `.venv-llama/`, which
`benchmarks/peer_server.py` installs); llama-cpp-python is not part of `make install` (a source build of minutes)."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
LLAMA_ENV = ROOT / ".venv-llama"
EXE = str(Path(sys.executable).with_name("toolpaper"))


def _llama_path() -> str | None:
    for path in ("", str(LLAMA_ENV)):
        env = {**os.environ, **({"PYTHONPATH": path} if path else {})}
        if subprocess.run([sys.executable, "-c", "import llama_cpp.server.app"], capture_output=True,
                          env=env).returncode == 0: return path
    return None


PATH = _llama_path()
pytestmark = pytest.mark.skipif(PATH is None, reason="llama-cpp-python is not installed (benchmarks/peer_server.py "
                                "installs it into .venv-llama/: a source build of minutes, not part of make install)")


@pytest.fixture(scope="module")
def server():
    from peer_server import start_server
    proc, url = start_server(PATH, None)
    yield url
    proc.terminate(); proc.wait(timeout=30)


def test_client_reads_the_peer_servers_answers(server, monkeypatch):
    "Plain chat, usage counts and a JSON schema (in llama.cpp's response_format form) through toolpaper's client."
    from toolpaper.client import OpenAIClient
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    c = OpenAIClient("smollm2", base_url=server)
    out = c.complete([[{"role": "user", "content": "Count: one, two, three"}]], max_tokens=12)[0]
    assert isinstance(out.text, str) and out.completion_tokens <= 12
    assert c.usage.as_dict()["completion_tokens"] > 0
    schema = {"type": "object", "properties": {"api": {"type": "string"}}, "required": ["api"]}
    [text] = c.generate([[{"role": "user", "content": "Name an API as JSON"}]], max_tokens=24, schema=schema)
    assert c.schema_form == "json_object" and c.schema_refused is None and text.lstrip().startswith("{")


def test_bench_runs_against_the_peer_server(server, tmp_path):
    out = tmp_path / "deer"
    cmd = [EXE, "bench", "deer", "--model", "smollm2", "--base-url", server, "--api", "completions", "--limit", "2",
           "--max-tokens", "16", "--out", str(out), "--no-progress"]       # DEER's prompts are text: completions
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 2
    assert "p_dc" in json.dumps(json.loads((out / "metrics.json").read_text()))
