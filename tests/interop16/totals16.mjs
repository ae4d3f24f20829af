#!/usr/bin/env node
// The token and cost totals 1.6.0 gives a session file, for tests/suite/interop16.rs: its own
// usage-totals.js (createUsageTotals, addUsageToTotals, getUsageCostBreakdown) over the
// entries its SessionManager reads, summed as getSessionStats and the footer sum them (usage
// entries, compaction and branch-summary usage, tool-result usage, assistant usage), and the
// session list's messageCount.
//
//   node22 tests/interop16/totals16.mjs FILE...     one JSON array, one object per file

import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, "node_modules/@earendil-works/pi-coding-agent/dist");
const { SessionManager } = await import(pathToFileURL(join(pkg, "index.js")).href);
const { createUsageTotals, addUsageToTotals, getUsageCostBreakdown } = await import(
	pathToFileURL(join(pkg, "core/usage-totals.js")).href
);

const out = [];
for (const file of process.argv.slice(2)) {
	const dir = mkdtempSync(join(tmpdir(), "pi16-totals-"));
	try {
		const copy = join(dir, basename(file));
		copyFileSync(file, copy);
		const manager = SessionManager.open(copy, dir);
		const entries = manager.getEntries();
		const totals = createUsageTotals();
		let messages = 0;
		for (const entry of entries) {
			if (entry.type === "message") messages++;
			if (entry.type === "usage") addUsageToTotals(totals, entry.usage);
			else if (entry.type === "message" && entry.message.role === "assistant")
				addUsageToTotals(totals, entry.message.usage);
			else if (entry.type === "message" && entry.message.role === "toolResult" && entry.message.usage)
				addUsageToTotals(totals, entry.message.usage);
			else if ((entry.type === "branch_summary" || entry.type === "compaction") && entry.usage)
				addUsageToTotals(totals, entry.usage);
		}
		const list = await SessionManager.listAll(dir);
		out.push({
			file,
			totals,
			messages,
			messageCount: list[0]?.messageCount ?? null,
			breakdown: getUsageCostBreakdown(entries),
		});
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
}
process.stdout.write(`${JSON.stringify(out)}\n`);
