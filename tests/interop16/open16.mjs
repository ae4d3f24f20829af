#!/usr/bin/env node
// Opens a session file the way the current reference (1.6.0) resumes one, for
// benches/context16.rs: SessionManager.open of FILE (a private copy: opening may append a
// missing final newline), then buildSessionContext(); prints the context as JSON.
//
//   node22 tests/interop16/open16.mjs FILE

import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const { SessionManager } = await import(
	pathToFileURL(join(here, "node_modules/@earendil-works/pi-coding-agent/dist/index.js")).href
);
const file = process.argv[2];
if (!file) {
	process.stderr.write("usage: node open16.mjs FILE\n");
	process.exit(2);
}
const dir = mkdtempSync(join(tmpdir(), "pi16-open-"));
try {
	const copy = join(dir, basename(file));
	copyFileSync(file, copy);
	const manager = SessionManager.open(copy, dir);
	process.stdout.write(JSON.stringify(manager.buildSessionContext()));
	process.stdout.write("\n");
} finally {
	rmSync(dir, { recursive: true, force: true });
}
