#!/usr/bin/env node
// Times the reference's SessionManager.open on a session file, for benches/interchange.rs.
//
//   node benches/reference-open.mjs FILE [RUNS]
//
// Loads the pinned package from tests/interop/node_modules. Each run opens a fresh copy of
// FILE (opening may rewrite old files) and builds the session context, as resuming does;
// prints {"openMs": [...], "contextMs": [...]} (wall-clock milliseconds per run).

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
const contextMs = [];
for (let run = 0; run < runs; run++) {
	const dir = mkdtempSync(join(tmpdir(), "pi-bench-"));
	const copy = join(dir, basename(file));
	copyFileSync(file, copy);
	const start = performance.now();
	const sm = SessionManager.open(copy);
	openMs.push(performance.now() - start);
	const before = performance.now();
	sm.buildSessionContext();
	contextMs.push(performance.now() - before);
	rmSync(dir, { recursive: true, force: true });
}
process.stdout.write(`${JSON.stringify({ openMs, contextMs })}\n`);
