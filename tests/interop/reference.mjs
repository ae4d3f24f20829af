#!/usr/bin/env node
// Asks the reference implementation (the pinned @mariozechner/pi-coding-agent of
// package.json) what it makes of session files, for tests/suite/interop.rs.
//
//   node reference.mjs SPEC.json
//
// SPEC.json is an array of {"file": PATH, "leaf": ID?, "migrate": BOOL?}. With "migrate",
// the answer is {"migrated": [line, ...]}: the file's lines after the reference's parse and
// v1/v2 -> v3 migration, each as JSON.stringify writes it when it rewrites the file.
// Otherwise the file is copied to a
// private temporary directory (the reference rewrites some files when it opens them), opened
// with SessionManager.open, optionally moved to `leaf` with branch(), and described as
//   {header, fileRewritten, leafId, entries, sessionName, context, tree, branch}
// or {error} if the reference throws. The answers are printed as one JSON array.

import crypto from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

// Ids the reference invents while migrating a v1 file come from crypto.randomUUID; make
// them 00000001, 00000002, ... in order of generation (before the package is loaded).
let uuidCounter = 0;
crypto.randomUUID = () => {
	uuidCounter++;
	return `${uuidCounter.toString(16).padStart(8, "0")}-0000-4000-8000-000000000000`;
};
syncBuiltinESMExports();

const { SessionManager, parseSessionEntries, migrateSessionEntries } = await import("@mariozechner/pi-coding-agent");

/** getTree() flattened in pre-order: {id, parentId, type, label?, labelTimestamp?}. */
function flattenTree(roots) {
	const out = [];
	const stack = [...roots].reverse();
	while (stack.length > 0) {
		const node = stack.pop();
		const row = { id: node.entry.id ?? null, parentId: node.entry.parentId ?? null, type: node.entry.type };
		if (node.label !== undefined) row.label = node.label;
		if (node.labelTimestamp !== undefined) row.labelTimestamp = node.labelTimestamp;
		out.push(row);
		for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i]);
	}
	return out;
}

function describe(file, leaf) {
	const dir = mkdtempSync(join(tmpdir(), "pi-interop-"));
	const copy = join(dir, basename(file));
	copyFileSync(file, copy);
	let stage = "open";
	try {
		const original = readFileSync(copy);
		const sm = SessionManager.open(copy);
		const fileRewritten = !original.equals(readFileSync(copy));
		if (leaf !== undefined && leaf !== null) {
			stage = "branch";
			sm.branch(leaf);
		}
		stage = "describe";
		const leafId = sm.getLeafId();
		return {
			header: sm.getHeader(),
			fileRewritten,
			leafId: leafId ?? null,
			entries: sm.getEntries().length,
			sessionName: sm.getSessionName() ?? null,
			context: sm.buildSessionContext(),
			tree: flattenTree(sm.getTree()),
			branch: sm
				.getBranch()
				.map((entry) => entry.id)
				.reverse(),
		};
	} catch (err) {
		return { error: `${stage} failed: ${err instanceof Error ? err.message : String(err)}` };
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
}

const specFile = process.argv[2];
if (!specFile) {
	process.stderr.write("usage: node reference.mjs SPEC.json\n");
	process.exit(2);
}
const spec = JSON.parse(readFileSync(specFile, "utf8"));
function migrate(file) {
	uuidCounter = 0;
	const entries = parseSessionEntries(readFileSync(file, "utf8"));
	migrateSessionEntries(entries);
	return { migrated: entries.map((entry) => JSON.stringify(entry)) };
}

const answers = spec.map(({ file, leaf, migrate: wantMigrate }) => (wantMigrate ? migrate(file) : describe(file, leaf)));
process.stdout.write(`${JSON.stringify(answers)}\n`);
