#!/usr/bin/env python3
"""Benchmark of `pi sync` against a local PostgreSQL server (not run in CI; docs/BENCHMARKS.md,
"Sync").

Starts a throwaway cluster (initdb in a temporary directory, as the `postgres` user when run as
root, a free port on 127.0.0.1, fsync off: the server's own durability is not what is measured),
then measures, with the binary given by --pi (default target/release/pi):

1. push throughput: a generated 100,000-entry session (user and assistant messages of about
   400 bytes, as tests' bulk files) imported into a fresh agent dir, then `pi sync --push`,
   in entries/s; against `psql \\copy` of the same rows (session id, seq, payload and the
   columns pi fills, from a CSV written by this script) into a table of the same shape, the
   physical limit of loading those rows through one connection;
2. an up-to-date sync of 1,000 sessions: the median wall time of `pi sync` (process start to
   exit) and of the sync itself (its --json `ms`), over 15 runs after a first sync;
3. remote search: the archive filled to --messages messages (default 1,000,000) by SQL (the
   same documents and tsvectors pi writes), then the median of `pi sessions search --remote`
   over a set of queries (process included) and of the query alone on the server.

Usage: scripts/sync-bench.py [--pi PATH] [--entries N] [--sessions N] [--messages N]
(0 skips a part)
"""

import argparse
import csv
import json
import os
import pwd
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pg_bin():
    versions = sorted(
        (int(v), v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit()
    )
    return f"/usr/lib/postgresql/{versions[-1][1]}/bin"


class Cluster:
    def __init__(self, root):
        self.root = root
        self.port = free_port()
        self.bin = pg_bin()
        self.data = os.path.join(root, "data")
        self.owner = None
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            self.owner = (user.pw_uid, user.pw_gid)
            os.chown(root, *self.owner)
        self.as_owner([f"{self.bin}/initdb", "-D", self.data, "-U", "pi", "--auth=trust",
                       "-E", "UTF8", "--no-sync"])
        with open(os.path.join(self.data, "postgresql.auto.conf"), "a") as conf:
            conf.write(f"listen_addresses='127.0.0.1'\nport={self.port}\n"
                       f"unix_socket_directories='{root}'\nfsync=off\nfull_page_writes=off\n"
                       "shared_buffers=256MB\nmax_wal_size=4GB\n"
                       "shared_preload_libraries='pg_stat_statements'\n")
        self.as_owner([f"{self.bin}/pg_ctl", "-D", self.data, "-l", os.path.join(root, "log"),
                       "-w", "start"])
        self.url = f"postgres://pi@127.0.0.1:{self.port}/"

    def as_owner(self, cmd):
        if self.owner:
            cmd = ["setpriv", f"--reuid={self.owner[0]}", f"--regid={self.owner[1]}",
                   "--clear-groups"] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    def stop(self):
        self.as_owner([f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"])

    def psql(self, db, sql, *extra):
        out = subprocess.run(["psql", self.url + db, "-X", "-q", "-A", "-t", "-v",
                              "ON_ERROR_STOP=1", *extra, "-c", sql],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def database(self, name):
        self.psql("postgres", f"CREATE DATABASE {name}")
        return self.url + name


def write_session(path, sid, entries, filler=400, cwd="/bench"):
    text = ("lorem ipsum dolor sit amet " * (filler // 27 + 1))[:filler]
    with open(path, "w") as out:
        out.write(json.dumps({"type": "session", "version": 3, "id": sid,
                              "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd}) + "\n")
        parent = None
        for n in range(entries):
            eid = f"{n + 1:08x}"
            if n % 2 == 0:
                msg = {"role": "user", "content": f"question {n} {text}", "timestamp": n}
            else:
                msg = {"role": "assistant", "content": [{"type": "text", "text": f"answer {n} {text}"}],
                       "api": "openai-completions", "provider": "bench", "model": "m",
                       "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                                 "totalTokens": 15, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                             "cacheWrite": 0, "total": 0.001}},
                       "stopReason": "stop", "timestamp": n}
            out.write(json.dumps({"type": "message", "id": eid, "parentId": parent,
                                  "timestamp": "2026-01-01T00:00:01.000Z", "message": msg}) + "\n")
            parent = eid


def pi(args, agent, env_extra=None, check=True):
    env = {"PATH": os.environ["PATH"], "HOME": agent, "PI_CODING_AGENT_DIR": agent,
           "NO_COLOR": "1"}
    env.update(env_extra or {})
    return subprocess.run([PI] + args, env=env, capture_output=True, text=True, check=check,
                          cwd=agent)


def bench_push(cluster, root, entries):
    agent = os.path.join(root, "push-agent")
    os.makedirs(agent)
    path = os.path.join(root, "big.jsonl")
    write_session(path, "bench-push-0000-4000-8000-000000000001", entries)
    pi(["import", path], agent)
    url = cluster.database("push")
    pi(["remote", "add", "bench", url + "?sslmode=disable"], agent)
    pi(["sync", "--pull"], agent)  # creates the schema: not part of the push
    cluster.psql("push", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    cluster.psql("push", "SELECT pg_stat_statements_reset()")
    start = time.perf_counter()
    report = json.loads(pi(["sync", "--push", "--json"], agent).stdout)
    push_s = time.perf_counter() - start
    # Where the time went: the server's execution time of the push statements.
    rows = cluster.psql("push", """SELECT calls, round(total_exec_time)::int, left(regexp_replace(query, '\\s+', ' ', 'g'), 60)
                                    FROM pg_stat_statements WHERE total_exec_time > 1
                                   ORDER BY total_exec_time DESC LIMIT 4""")
    print(f"  push: {report['pushed']['batches']} batches; server time by statement (calls|ms|text):")
    for row in rows.splitlines():
        print(f"    {row}")
    count = int(cluster.psql("push", "SELECT count(*) FROM pi_entries"))
    assert count == entries, count
    # The same rows through psql \copy, into a table of pi_entries' shape.
    db = sqlite3.connect(os.path.join(agent, "pi.db"))
    csv_path = os.path.join(root, "rows.csv")
    with open(csv_path, "w", newline="") as out:
        writer = csv.writer(out)
        for seq, eid, parent, typ, payload in db.execute(
                "SELECT seq, id, parent_id, type, payload FROM entries ORDER BY seq"):
            writer.writerow(["bench-copy", seq, eid, parent, typ, "\\x" + bytes(payload).hex()])
    cluster.psql("push", "CREATE TABLE copy_entries (LIKE pi_entries INCLUDING ALL)")
    start = time.perf_counter()
    cluster.psql("push", "\\copy copy_entries (session_id, seq, entry_id, parent_id, type, payload) "
                 f"FROM '{csv_path}' WITH (FORMAT csv)")
    copy_s = time.perf_counter() - start
    return entries / push_s, entries / copy_s, push_s, copy_s


def bench_up_to_date(cluster, root, sessions):
    agent = os.path.join(root, "many-agent")
    files = os.path.join(root, "many")
    os.makedirs(agent)
    os.makedirs(files)
    for n in range(sessions):
        write_session(os.path.join(files, f"s{n}.jsonl"), f"bench-many-{n:08d}", 6, 100,
                      cwd=f"/bench/p{n % 20}")
    pi(["import", files], agent)
    url = cluster.database("many")
    pi(["remote", "add", "bench", url + "?sslmode=disable"], agent)
    pi(["sync"], agent)
    pi(["sync"], agent)
    walls, inner = [], []
    for _ in range(15):
        start = time.perf_counter()
        out = pi(["sync", "--json"], agent)
        walls.append((time.perf_counter() - start) * 1000)
        report = json.loads(out.stdout)
        assert report["pushed"]["entries"] == 0 and report["pulled"]["entries"] == 0, report
        inner.append(report["ms"])
    return statistics.median(walls), statistics.median(inner)


def bench_search(cluster, root, messages):
    agent = os.path.join(root, "search-agent")
    os.makedirs(agent)
    url = cluster.database("search")
    pi(["remote", "add", "bench", url + "?sslmode=disable"], agent)
    pi(["sync"], agent)
    words = ["deploy", "canary", "rollback", "migration", "flaky", "timeout", "index", "vacuum",
             "latency", "cache", "retry", "schema", "lock", "query", "commit", "branch"]
    per = 1000
    sessions = messages // per
    cluster.psql("search", f"""
        INSERT INTO pi_sessions (id, header, cwd, created_at, user_name, host, next_seq, entries,
                                 messages, last_activity)
        SELECT 's' || g, '{{}}'::bytea, '/p' || (g % 50), '2026-01-01', 'u' || (g % 20), 'h', {per},
               {per}, {per}, timestamp '2026-01-01' + g * interval '1 minute'
          FROM generate_series(1, {sessions}) AS g""")
    arr = "ARRAY[" + ",".join(f"'{w}'" for w in words) + "]"
    cluster.psql("search", f"""
        INSERT INTO pi_entries (session_id, seq, entry_id, type, ts, payload, role, is_message)
        SELECT 's' || s, q, lpad(to_hex(q), 8, '0'), 'message',
               timestamp '2026-01-01' + (s * {per} + q) * interval '1 second', '{{}}'::bytea,
               'user', true
          FROM generate_series(1, {sessions}) AS s, generate_series(0, {per - 1}) AS q""")
    # The GIN index is built once after the load (as a restore would), not row by row.
    cluster.psql("search", "DROP INDEX pi_docs_tsv")
    cluster.psql("search", f"""
        INSERT INTO pi_docs (session_id, seq, ord, role, kind, ts, body, tsv)
        SELECT e.session_id, e.seq, 0, 'user', 'text', e.ts, t.body, to_tsvector('simple', t.body)
          FROM pi_entries AS e,
               LATERAL (SELECT 'message ' || e.seq || ' about ' ||
                               ({arr})[1 + (hashint4((e.seq + length(e.session_id) * 7919)::int4) & 15)] || ' and ' ||
                               ({arr})[1 + (hashint4((e.seq * 31 + 17)::int4) & 15)] || ' word' || (hashint4(e.seq::int4) & 1023)
                               AS body) AS t""")
    cluster.psql("search", "CREATE INDEX pi_docs_tsv ON pi_docs USING gin (tsv)")
    cluster.psql("search", "VACUUM ANALYZE")
    queries = ["deploy", "\"flaky timeout\"", "word17", "canary OR rollback", "vacu*",
               "migration NOT lock", "word999", "\"cache retry\""]
    walls = []
    for _ in range(3):
        for query in queries:
            start = time.perf_counter()
            pi(["sessions", "search", "--remote", "bench", "--json", query], agent)
            walls.append((time.perf_counter() - start) * 1000)
    server = []
    for query in ["deploy", "word17", "flaky <-> timeout"]:
        # The shape of pi's search statement (src/remote/archive.rs): the newest 1,000
        # matches, ranked.
        out = cluster.psql("search", f"""EXPLAIN (ANALYZE, FORMAT JSON)
            SELECT r.session_id, r.seq, ts_rank_cd(r.tsv, '{query}'::tsquery, 32) AS score
              FROM (SELECT d.* FROM pi_docs AS d JOIN pi_sessions AS s ON s.id = d.session_id
                     WHERE d.tsv @@ '{query}'::tsquery ORDER BY d.ts DESC NULLS LAST
                     LIMIT 1000) AS r
             ORDER BY score DESC, r.ts DESC LIMIT 20""")
        server.append(json.loads(out)[0]["Execution Time"])
    docs = int(cluster.psql("search", "SELECT count(*) FROM pi_docs"))
    return docs, statistics.median(walls), server


def main():
    global PI
    parser = argparse.ArgumentParser()
    parser.add_argument("--pi", default="target/release/pi")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    args = parser.parse_args()
    PI = os.path.abspath(args.pi)
    root = tempfile.mkdtemp(prefix="pi-sync-bench-")
    os.chmod(root, 0o755)
    cluster = Cluster(root)
    try:
        if args.entries > 0:
            push, copy, push_s, copy_s = bench_push(cluster, root, args.entries)
            print(f"push {args.entries} entries: {push:,.0f} entries/s ({push_s:.2f} s); "
                  f"psql \\copy of the same rows: {copy:,.0f} rows/s ({copy_s:.2f} s); "
                  f"ratio {copy / push:.2f}x", flush=True)
        if args.sessions > 0:
            wall, inner = bench_up_to_date(cluster, root, args.sessions)
            print(f"up-to-date sync of {args.sessions} sessions: median {wall:.1f} ms per "
                  f"process, {inner:.1f} ms inside pi (connect + one round trip + the local "
                  "check)", flush=True)
        if args.messages > 0:
            docs, wall, server = bench_search(cluster, root, args.messages)
            print(f"remote search over {docs:,} documents: median {wall:.1f} ms per process; "
                  f"server time {', '.join(f'{ms:.1f}' for ms in server)} ms")
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


PI = None
if __name__ == "__main__":
    sys.exit(main())
