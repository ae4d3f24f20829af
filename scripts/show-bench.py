#!/usr/bin/env python3
"""Times `pi sessions show` (text and --json) against `pi export --jsonl` of the same
session, whole processes, interleaved, and reports each one's wall time and peak RSS.

Usage: scripts/show-bench.py PI FILE.jsonl [RUNS]

PI is a pi binary (a release build: target/release/pi); FILE is a reference session file,
imported first into a fresh database in a temporary directory. Output goes to /dev/null.
Figures: median and best wall time, and the largest peak RSS (ru_maxrss) over the runs.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run(argv, env):
    """Runs argv with stdout to /dev/null; returns (wall seconds, peak RSS in MiB)."""
    with open(os.devnull, "wb") as sink:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        stderr = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} failed: {stderr}")
    return wall, usage.ru_maxrss / 1024.0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pi, source = os.path.abspath(sys.argv[1]), sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    work = tempfile.mkdtemp(prefix="pi-show-bench-")
    try:
        env = dict(os.environ, PI_AUTO_IMPORT="0", HOME=work,
                   PI_CODING_AGENT_DIR=os.path.join(work, "agent"))
        db = os.path.join(work, "pi.db")
        base = [pi, "--db", db]
        out = subprocess.run(base + ["import", "--json", source], env=env,
                             capture_output=True, check=True)
        # One JSON object per imported file.
        session = json.loads(out.stdout.splitlines()[0])["session"]
        cases = {
            "export --jsonl": base + ["export", session],
            "sessions show (text)": base + ["sessions", "show", session],
            "sessions show --json": base + ["sessions", "show", session, "--json"],
        }
        figures = {name: [] for name in cases}
        for _ in range(runs):
            for name, argv in cases.items():
                figures[name].append(run(argv, env))
        size = os.path.getsize(source) / (1024 * 1024)
        print(f"session {session}: {size:.1f} MiB source, {runs} runs each, interleaved")
        print(f"{'command':<24} {'wall best':>10} {'wall median':>12} {'peak RSS':>10}")
        medians = {}
        for name, samples in figures.items():
            walls = [wall for wall, _ in samples]
            medians[name] = statistics.median(walls)
            peak = max(rss for _, rss in samples)
            print(f"{name:<24} {min(walls):>9.3f}s {medians[name]:>11.3f}s {peak:>8.1f} MiB")
        export = medians["export --jsonl"]
        for name in ("sessions show (text)", "sessions show --json"):
            print(f"{name} / export (median wall): {medians[name] / export:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
