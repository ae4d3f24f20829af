#!/usr/bin/env python3
"""Interleaved A/B of whole `pi sessions search` processes: before (old binary, its DB) and
after (new binary, its DB), alternating run by run; medians and p99 per query."""
import subprocess, sys, time, statistics, json
# Usage: scripts/search-ab.py PI_BEFORE DB_BEFORE PI_AFTER DB_AFTER [RUNS]
# (the databases: the search bench's corpus, `cargo bench --bench search -- --dir DIR`, one per
# schema version; the queries are the bench's, over its vocabulary).
A = (sys.argv[1], sys.argv[2])
B = (sys.argv[3], sys.argv[4])
runs = int(sys.argv[5]) if len(sys.argv) > 5 else 21
rare, medium, medium2 = "marpolcrapraNek", "neksol", "belluxnekbel"
queries = []
for scope in (["--all"], ["--cwd", "/home/dev/project-0"]):
    queries += [
        ["one word (rare)", scope, [rare]],
        ["one word (medium)", scope, [medium]],
        ["two words", scope, [medium, medium2]],
        ["phrase", scope, ['"cannot find value"']],
        ["very common word", scope, ["the"]],
        ["two very common words", scope, ["the", "error"]],
    ]
def run(binary, db, scope, words):
    cmd = [binary, "--db", db, "sessions", "search", *scope, "--json", "--limit", "20", "--", *words]
    t = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True).stdout
    return time.perf_counter() - t, out
print(f"{'query':<52} {'before p50':>10} {'after p50':>10} {'after/before':>12} {'before max':>10} {'after max':>10} same")
for label, scope, words in queries:
    ta, tb = [], []
    outa = outb = None
    run(*A, scope, words); run(*B, scope, words)  # warm the page cache
    for i in range(runs):
        if i % 2 == 0:
            t, outa = run(*A, scope, words); ta.append(t)
            t, outb = run(*B, scope, words); tb.append(t)
        else:
            t, outb = run(*B, scope, words); tb.append(t)
            t, outa = run(*A, scope, words); ta.append(t)
    ha = [(h["session"], h["entry"], h["snippet"]) for h in json.loads(outa)]
    hb = [(h["session"], h["entry"], h["snippet"]) for h in json.loads(outb)]
    ma, mb = statistics.median(ta) * 1000, statistics.median(tb) * 1000
    print(f"{label + ' (' + ' '.join(scope + words) + ')':<52} {ma:>8.2f}ms {mb:>8.2f}ms {mb/ma:>11.2f}x {max(ta)*1000:>8.2f}ms {max(tb)*1000:>8.2f}ms {'yes' if ha == hb else 'NO'}", flush=True)
