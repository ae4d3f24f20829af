#!/usr/bin/env node
// Times the reference's SessionManager.open on a session file, for benches/interchange.rs.
//
//   node benches/reference-open.mjs FILE [RUNS]
//
// Loads the pinned package from tests/interop/node_modules. Each run opens a fresh copy of
// FILE (opening may rewrite old files) and builds the session context, as resuming does;
// prints {"openMs": [...], "openCpuMs": [...], "contextMs": [...]} (wall-clock and CPU
// milliseconds per run; CPU time counts every thread of the process, the garbage
// collector's included).

import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, "..", "tests", "interop", "node_modules", "@mariozechner", "pi-coding-agent", "dist", "index.js");
const { SessionManager } = await import(pathToFileURL(pkg).href);

const file = process.argv[2];
const runs = Number(process.argv[3] ?? 3);
if (!file) {
	process.stderr.write("usage: node benches/reference-open.mjs FILE [RUNS]\n");
	process.exit(2);
}
const openMs = [];
const openCpuMs = [];
const contextMs = [];
for (let run = 0; run < runs; run++) {
	const dir = mkdtempSync(join(tmpdir(), "pi-bench-"));
	const copy = join(dir, basename(file));
	copyFileSync(file, copy);
	const cpu = process.cpuUsage();
	const start = performance.now();
	const sm = SessionManager.open(copy);
	openMs.push(performance.now() - start);
	const used = process.cpuUsage(cpu);
	openCpuMs.push((used.user + used.system) / 1000);
	const before = performance.now();
	sm.buildSessionContext();
	contextMs.push(performance.now() - before);
	rmSync(dir, { recursive: true, force: true });
}
process.stdout.write(`${JSON.stringify({ openMs, openCpuMs, contextMs })}\n`);
