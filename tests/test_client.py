"""The OpenAI-compatible client and record/replay against a stub server on 127.0.0.1 that injects faults."""
import http.server, json, threading, time
import pytest
from toolpaper.client import CacheMiss, LLMError, OpenAIClient, RecordReplay


class Stub(http.server.BaseHTTPRequestHandler):
    """Answers /v1/chat/completions; the user message picks the fault script: 'ok', '429', '500', 'slow',
    'truncated', 'nonjson' fail once then succeed; 'always500' and 'bad400' never succeed."""
    seen: dict = {}
    bodies: list = []
    lock = threading.Lock()

    def log_message(self, *a): pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        word = body["messages"][-1]["content"]
        with self.lock:
            n = self.seen[word] = self.seen.get(word, 0) + 1
            self.bodies.append(body)
        fault = word.split("-")[0]
        first = n == 1
        if fault == "always500" or (fault == "500" and first): return self._send(500, b'{"error": {"message": "boom"}}')
        if fault == "429" and first:
            return self._send(429, b'{"error": {"message": "slow down"}}', {"retry-after": "0"})
        if fault == "bad400": return self._send(400, b'{"error": {"message": "bad request"}}')
        if fault == "noschema" and "response_format" in body:       # a server without structured outputs
            return self._send(400, b'{"error": {"message": "response_format json_schema is not supported"}}')
        if fault == "llamacpp" and body.get("response_format", {}).get("type") == "json_schema":   # llama.cpp 0.3
            return self._send(500, b'{"error": {"message": "1 validation error: {\'type\': \'literal_error\', \'loc\': '
                                   b'(\'body\', \'response_format\', \'type\')}"}}')   # a 500, as llama-cpp-python
        if fault == "slow" and first: time.sleep(1.5)
        msg = {"role": "assistant", "content": f"answer to {word}"}
        if body.get("tools"):               # native function calling: the call comes back in tool_calls
            msg = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": body["tools"][0]["function"]["name"], "arguments": json.dumps({"city": "Lima"})}}]}
        ok = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
              "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}
        raw = json.dumps(ok).encode()
        if fault == "truncated" and first: raw = raw[: len(raw) // 2]
        if fault == "nonjson" and first: raw = b"<html>gateway hiccup</html>"
        # malformed answers: once ('nochoices', 'emptychoices', 'utf16', 'nullmessage') or always ('alwaysnochoices')
        if fault in ("nochoices", "alwaysnochoices") and (first or fault.startswith("always")):
            raw = json.dumps({k: v for k, v in ok.items() if k != "choices"}).encode()
        if fault == "emptychoices" and first: raw = json.dumps({**ok, "choices": []}).encode()
        if fault == "nullmessage" and first:
            raw = json.dumps({**ok, "choices": [{"index": 0, "message": None}]}).encode()
        if fault == "utf16" and first: raw = b"\x00\xd8\x00garbage"
        self._send(200, raw)

    def _send(self, code, raw, headers=None):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items(): self.send_header(k, v)
        self.end_headers(); self.wfile.write(raw)


@pytest.fixture()
def server():
    Stub.seen, Stub.bodies = {}, []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown(); srv.server_close()


def client(url, **kw):
    return OpenAIClient(
        "stub-model",
        concurrency=3,
        base_url=url,
        timeout=1.0,
        max_retries=3,
        backoff=0.01,
        jitter=0.5,
        max_wait=0.05,
        seed=0,
        prices=(1.0, 2.0),
        **kw,
    )


def test_faults_are_retried_and_counted(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    c = client(server)
    words = ["ok-1", "429-1", "500-1", "slow-1", "truncated-1", "nonjson-1", "ok-2", "always500-1", "bad400-1"]
    res = c.complete([[{"role": "user", "content": w}] for w in words], max_tokens=5, errors="return")
    good = {w: r.text for w, r in zip(words, res) if not isinstance(r, LLMError)}
    bad = [w for w, r in zip(words, res) if isinstance(r, LLMError)]
    assert bad == ["always500-1", "bad400-1"]
    assert good == {w: f"answer to {w}" for w in words if w not in bad}
    u = c.usage
    # one retry each for 429, 500, slow (time-out), truncated, nonjson; 3 for always500; none for bad400
    assert u.retries == 5 + 3
    assert u.requests == len(words) + u.retries
    assert u.failures == 2
    assert (u.prompt_tokens, u.completion_tokens) == (7 * 7, 3 * 7)
    assert u.cost_usd == pytest.approx((49 * 1.0 + 21 * 2.0) / 1e6)


def test_malformed_answers_are_retried_then_named(server):
    c = client(server)
    words = ["nochoices-1", "emptychoices-1", "nullmessage-1", "utf16-1", "alwaysnochoices-1"]
    res = c.complete([[{"role": "user", "content": w}] for w in words], max_tokens=5, errors="return")
    assert [r.text for r in res[:4]] == [f"answer to {w}" for w in words[:4]]
    assert c.usage.retries == 4 + 3
    err = str(res[4])
    assert isinstance(res[4], LLMError)
    for part in ("stub-model at " + server, "request 'alwaysnochoices-1'", "after 4 attempt(s)", "no 'choices' list"):
        assert part in err, (part, err)


def test_scheme_less_base_url_is_named():
    with pytest.raises(ValueError, match="did you mean 'http://127.0.0.1:9/v1'"):
        OpenAIClient("m", base_url="127.0.0.1:9/v1")


def test_backoff_grows_and_is_capped(server):
    c = OpenAIClient("m", base_url=server, backoff=1.0, jitter=0.5, max_wait=8.0, seed=1)
    waits = [c.wait(a) for a in range(6)]
    assert all(1.0 * 2 ** a <= w <= min(8.0, 2 ** a) * 1.5 for a, w in enumerate(waits[:3]))
    assert all(8.0 <= w <= 12.0 for w in waits[3:])


def test_record_then_replay_is_exact_and_keeps_no_key(server, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    rec = RecordReplay(client(server), tmp_path / "cache.jsonl")
    convs = [[{"role": "user", "content": w}] for w in ["ok-a", "500-b", "ok-c"]]
    first = rec.generate(convs, max_tokens=5)
    rep = RecordReplay(None, tmp_path / "cache.jsonl", mode="replay", model="stub-model")
    again = rep.generate(convs, max_tokens=5)
    assert first == again and rep.usage.cache_hits == 3
    with pytest.raises(CacheMiss):
        rep.complete([[{"role": "user", "content": "never-seen"}]], max_tokens=5)
    with pytest.raises(CacheMiss):                                       # other parameters, other key
        rep.complete(convs[:1], max_tokens=5, temperature=0.5)
    # a greedy answer that ended on its own within 5 tokens is the answer under a limit of 6 too (read, not written)
    before = (tmp_path / "cache.jsonl").read_text()
    assert rep.generate(convs[:1], max_tokens=6) == first[:1]
    assert (tmp_path / "cache.jsonl").read_text() == before
    assert "sk-test-secret" not in (tmp_path / "cache.jsonl").read_text()


def test_cache_tolerates_a_line_cut_by_a_crash(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"key": "k1", "model": "m", "text": "t"}) + "\n" + '{"key": "k2", "mod')
    c = RecordReplay(None, p, mode="replay", model="m")
    assert set(c.entries) == {"k1"}
    # a bad line elsewhere is skipped with a warning naming its line, never passed on
    p.write_text('{"key": "k2", "mod\n' + json.dumps({"key": "k1", "model": "m", "text": "t"}) + "\n")
    with pytest.warns(UserWarning, match="c.jsonl:1: skipped: not valid JSON"):
        c = RecordReplay(None, p, mode="replay", model="m")
    assert set(c.entries) == {"k1"}


def test_tools_are_sent_and_tool_calls_come_back_as_text(server):
    from toolpaper.sealtools import native_calls
    c = client(server)
    tools = [
        {
            "type": "function",
            "function": {"name": "getWeather", "description": "", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    [text] = c.generate([{"messages": [{"role": "user", "content": "ok-tools"}], "tools": tools}], max_tokens=5)
    assert json.loads(native_calls(text)) == [{"api": "getWeather", "parameters": {"city": "Lima"}, "responses": []}]


SCHEMA = {"type": "object", "properties": {"api": {"type": "string"}}, "required": ["api"]}


def test_schema_goes_to_the_server_as_response_format(server):
    c = client(server)
    assert c.generate([[{"role": "user", "content": "ok-schema"}]], schema=SCHEMA) == ["answer to ok-schema"]
    assert Stub.bodies[-1]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}
    c.generate([[{"role": "user", "content": "ok-plain"}]])
    assert "response_format" not in Stub.bodies[-1] and c.schema_refused is None


def test_a_refused_schema_falls_back_with_a_warning(server):
    c = client(server)
    with pytest.warns(UserWarning, match="refused response_format"):
        out = c.generate([[{"role": "user", "content": "noschema-1"}]], schema=SCHEMA)
    assert out == ["answer to noschema-1"] and "response_format" not in Stub.bodies[-1]
    assert c.schema_refused.startswith("BadRequestError") and c.usage.failures == 0
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # stated once: later requests go unconstrained quietly
        assert c.generate([[{"role": "user", "content": "noschema-2"}]], schema=SCHEMA) == ["answer to noschema-2"]
    assert sum("response_format" in b for b in Stub.bodies) == 2      # OpenAI's form, then llama.cpp's, refused
    bad = client(server).complete([[{"role": "user", "content": "bad400"}]], schema=SCHEMA, errors="return")[0]
    assert isinstance(bad, LLMError)                        # other 400s are errors, not refusals


def test_a_schema_in_llama_cpps_form(server):
    "A server that takes only `json_object` + `schema` (llama-cpp-python's) gets that form, kept for later requests."
    c = client(server)
    assert c.generate([[{"role": "user", "content": "llamacpp-1"}]], schema=SCHEMA) == ["answer to llamacpp-1"]
    assert Stub.bodies[-1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert c.schema_refused is None and c.schema_form == "json_object"
    c.generate([[{"role": "user", "content": "llamacpp-2"}]], schema=SCHEMA)
    assert Stub.bodies[-1]["response_format"]["type"] == "json_object"


def test_constrained_and_free_answers_are_cached_apart(server, tmp_path):
    rec = RecordReplay(client(server), tmp_path / "r.jsonl")
    conv = [{"role": "user", "content": "ok-cache"}]
    rec.generate([conv]); rec.generate([conv], schema=SCHEMA); rec.generate([conv], schema=json.dumps(SCHEMA))
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 2      # the same schema written twice: one key
