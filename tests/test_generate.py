"""Crash safety of generation stages: SIGKILL at random moments, restart, no lost and no duplicated records."""
import json, os, random, signal, subprocess, sys, time
from pathlib import Path

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
    kills = 0
    for attempt in range(200):
        p = subprocess.Popen([sys.executable, "-c", WORKER, str(out), str(n)], stderr=subprocess.DEVNULL)
        try:
            p.wait(timeout=rng.uniform(0.4, 1.0))
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
