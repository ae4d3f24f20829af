// pi's Node host: loads one TypeScript/JavaScript extension of the reference pi (a `.ts`/`.js`
// file, or a directory with `package.json` `pi.extensions`, `index.ts` or `index.js`) with jiti
// and gives it the reference's `ExtensionAPI`, mapped onto pi's JSON-lines process protocol
// (docs/extensions.md). Written for pi from the reference's documented API.
//
// Usage: node host.mjs <extension path>
//
// stdout carries protocol lines only: the extension's console output goes to stderr.

import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const protocolOut = process.stdout.write.bind(process.stdout);
const toStderr = (...args) => {
	process.stderr.write(`${args.map((a) => (typeof a === "string" ? a : safeJson(a))).join(" ")}\n`);
};
// The protocol owns stdout: everything an extension prints goes to stderr.
console.log = toStderr;
console.info = toStderr;
console.debug = toStderr;
process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);

function safeJson(value) {
	try {
		return JSON.stringify(value);
	} catch {
		return String(value);
	}
}

function send(message) {
	protocolOut(`${JSON.stringify(message)}\n`);
}

const HOST = "pi's Node host";

function unsupported(name) {
	return () => {
		throw new Error(
			`${name} is not supported by ${HOST}: pi's REPL is line-based and has no custom TUI components`,
		);
	};
}

function notYet(name) {
	return () => {
		throw new Error(`${name} is not supported by ${HOST} yet`);
	};
}

// ----- calls into pi ---------------------------------------------------------------------------

let nextCallId = 1;
const pendingCalls = new Map();

function call(method, params = {}) {
	const id = `h${nextCallId++}`;
	return new Promise((resolve, reject) => {
		pendingCalls.set(id, { resolve, reject });
		send({ type: "call", id, method, params });
	});
}

// The reference's void methods (appendEntry, setLabel, notify, …) return at once; their calls
// are chained so they reach pi in order, and every answer to pi waits for the chain.
let effects = Promise.resolve();
function effect(method, params) {
	effects = effects.then(() =>
		call(method, params).catch((error) => toStderr(`${method} failed: ${error.message}`)),
	);
}
async function ordered(method, params) {
	await effects;
	return call(method, params);
}

// ----- the session snapshot behind the reference's synchronous getters -------------------------

let state = {
	sessionId: undefined,
	sessionName: null,
	leafId: null,
	entries: [],
	branch: [],
	model: null,
	thinkingLevel: "off",
	activeTools: [],
	allTools: [],
	isIdle: true,
	systemPrompt: "",
};

async function refresh() {
	await effects;
	state = await call("getState");
}

function entryById(id) {
	return state.entries.find((entry) => entry.id === id);
}

const sessionManager = {
	getCwd: () => hello.cwd,
	getSessionId: () => state.sessionId,
	getSessionName: () => state.sessionName ?? undefined,
	getSessionFile: () => undefined,
	getLeafId: () => state.leafId,
	getLeafEntry: () => (state.leafId ? entryById(state.leafId) : undefined),
	getEntry: (id) => entryById(id),
	getEntries: () => state.entries.slice(),
	getLabel: (id) => {
		let label;
		for (const entry of state.entries) {
			if (entry.type === "label" && entry.targetId === id) label = entry.label || undefined;
		}
		return label;
	},
	getBranch: (fromId) => {
		if (fromId === undefined) return state.branch.slice();
		const out = [];
		for (let entry = entryById(fromId); entry; entry = entryById(entry.parentId)) out.unshift(entry);
		return out;
	},
	getHeader: () => ({ type: "session", id: state.sessionId, cwd: hello.cwd }),
	getChildren: (id) => state.entries.filter((entry) => entry.parentId === id),
};

// ----- the extension's registrations ----------------------------------------------------------

const handlers = new Map();
const tools = new Map();
const commands = new Map();
const flags = new Map();
let hello = { cwd: process.cwd(), hasUI: false, events: [] };

const ui = {
	select: async (title, options, opts) =>
		(await ordered("select", { title, options, timeout: opts?.timeout })) ?? undefined,
	confirm: async (title, message, opts) =>
		Boolean(await ordered("confirm", { title, message, timeout: opts?.timeout })),
	input: async (title, placeholder, opts) =>
		(await ordered("input", { title, placeholder, timeout: opts?.timeout })) ?? undefined,
	editor: async (title, prefill) => (await ordered("editor", { title, prefill })) ?? undefined,
	notify: (message, type) => effect("notify", { message: String(message), type: type ?? "info" }),
	setStatus: (key, text) => effect("setStatus", { key, text }),
	setWidget: (key, content, options) => {
		if (typeof content === "function") unsupported("ctx.ui.setWidget with a component")();
		effect("setWidget", { key, lines: content, placement: options?.placement });
	},
	setTitle: (title) => effect("setTitle", { title }),
	setEditorText: (text) => effect("setEditorText", { text }),
	pasteToEditor: (text) => effect("setEditorText", { text }),
	custom: async () => unsupported("ctx.ui.custom")(),
	setFooter: unsupported("ctx.ui.setFooter"),
	setHeader: unsupported("ctx.ui.setHeader"),
	setEditorComponent: unsupported("ctx.ui.setEditorComponent"),
	getEditorComponent: () => undefined,
	addAutocompleteProvider: unsupported("ctx.ui.addAutocompleteProvider"),
	onTerminalInput: unsupported("ctx.ui.onTerminalInput"),
	setWorkingMessage: unsupported("ctx.ui.setWorkingMessage"),
	setWorkingVisible: unsupported("ctx.ui.setWorkingVisible"),
	setWorkingIndicator: unsupported("ctx.ui.setWorkingIndicator"),
	setHiddenThinkingLabel: unsupported("ctx.ui.setHiddenThinkingLabel"),
	getEditorText: notYet("ctx.ui.getEditorText"),
	getAllThemes: unsupported("ctx.ui.getAllThemes"),
	getTheme: unsupported("ctx.ui.getTheme"),
	setTheme: unsupported("ctx.ui.setTheme"),
	getToolsExpanded: () => false,
	setToolsExpanded: unsupported("ctx.ui.setToolsExpanded"),
	get theme() {
		return unsupported("ctx.ui.theme")();
	},
};

function makeContext(signal) {
	return {
		ui,
		get mode() {
			return hello.hasUI ? "rpc" : "print";
		},
		get hasUI() {
			return hello.hasUI;
		},
		get cwd() {
			return hello.cwd;
		},
		sessionManager,
		get model() {
			return state.model ?? undefined;
		},
		get thinkingLevel() {
			return state.thinkingLevel;
		},
		get modelRegistry() {
			return notYet("ctx.modelRegistry")();
		},
		scopedModels: [],
		signal,
		isIdle: () => state.isIdle,
		isProjectTrusted: () => true,
		abort: () => effect("abort", {}),
		hasPendingMessages: notYet("ctx.hasPendingMessages"),
		shutdown: notYet("ctx.shutdown"),
		getContextUsage: () => undefined,
		compact: notYet("ctx.compact"),
		getSystemPrompt: () => state.systemPrompt,
		// ExtensionCommandContext
		getSystemPromptOptions: notYet("ctx.getSystemPromptOptions"),
		waitForIdle: notYet("ctx.waitForIdle"),
		newSession: notYet("ctx.newSession"),
		fork: notYet("ctx.fork"),
		navigateTree: notYet("ctx.navigateTree"),
		switchSession: notYet("ctx.switchSession"),
		reload: notYet("ctx.reload"),
	};
}

const eventBus = (() => {
	const listeners = new Map();
	return {
		on(channel, handler) {
			const list = listeners.get(channel) ?? [];
			list.push(handler);
			listeners.set(channel, list);
			return () => listeners.set(channel, (listeners.get(channel) ?? []).filter((h) => h !== handler));
		},
		emit(channel, data) {
			for (const handler of listeners.get(channel) ?? []) handler(data);
		},
	};
})();

const pi = {
	on(event, handler) {
		const list = handlers.get(event) ?? [];
		list.push(handler);
		handlers.set(event, list);
		return () => handlers.set(event, (handlers.get(event) ?? []).filter((h) => h !== handler));
	},
	registerTool(tool) {
		if (!tool?.name) throw new Error("registerTool needs a `name`");
		tools.set(tool.name, tool);
	},
	registerCommand(name, options) {
		commands.set(String(name).replace(/^\//, ""), options);
	},
	registerFlag(name, options) {
		flags.set(name, options);
	},
	getFlag: (name) => flags.get(name)?.default,
	registerShortcut: (shortcut) => toStderr(`registerShortcut(${shortcut}) ignored: pi has no key bindings for extensions`),
	registerMessageRenderer: () => {},
	registerEntryRenderer: () => {},
	registerToolRenderer: () => {},
	registerMarkdownTransformer: () => {},
	registerProvider: notYet("pi.registerProvider"),
	unregisterProvider: notYet("pi.unregisterProvider"),
	sendMessage: (message, options) => effect("sendMessage", { message, options }),
	sendUserMessage: (content, options) => effect("sendUserMessage", { content, options }),
	appendEntry: (customType, data) => effect("appendEntry", { customType, data }),
	setSessionName: (name) => {
		state.sessionName = name;
		effect("setSessionName", { name });
	},
	getSessionName: () => state.sessionName ?? undefined,
	setLabel: (entryId, label) => effect("setLabel", { entryId, label }),
	exec: async (command, args = [], options = {}) => {
		const result = await ordered("exec", { command, args, options: { cwd: options.cwd, timeout: options.timeout } });
		return { ...result, truncated: false };
	},
	getActiveTools: () => state.activeTools.slice(),
	getAllTools: () => state.allTools.map((tool) => ({ ...tool })),
	setActiveTools: (toolNames) => {
		state.activeTools = [...toolNames];
		effect("setActiveTools", { toolNames });
	},
	getSettings: notYet("pi.getSettings"),
	getCommands: notYet("pi.getCommands"),
	setModel: async (model) => Boolean(await ordered("setModel", { provider: model?.provider, modelId: model?.id })),
	getThinkingLevel: () => state.thinkingLevel,
	setThinkingLevel: (level) => {
		state.thinkingLevel = level;
		effect("setThinkingLevel", { level });
	},
	events: eventBus,
};

// ----- the modules extensions import --------------------------------------------------------------

const OPTIONAL = Symbol("optional");

function schemaModule(label, exports) {
	return new Proxy(exports, {
		get(target, key) {
			if (key in target || typeof key === "symbol") return target[key];
			if (key === "then" || key === "__esModule") return undefined;
			return unsupported(`${label}.${String(key)}`);
		},
	});
}

const Type = schemaModule("Type", {
	Object(properties = {}, options = {}) {
		const required = Object.keys(properties).filter((key) => !properties[key]?.[OPTIONAL]);
		// TypeBox's key order (type, required, properties, options): requests match the reference's.
		return { type: "object", ...(required.length ? { required } : {}), properties: { ...properties }, ...options };
	},
	Optional(schema) {
		const copy = { ...schema };
		Object.defineProperty(copy, OPTIONAL, { value: true, enumerable: false });
		return copy;
	},
	String: (options = {}) => ({ type: "string", ...options }),
	Number: (options = {}) => ({ type: "number", ...options }),
	Integer: (options = {}) => ({ type: "integer", ...options }),
	Boolean: (options = {}) => ({ type: "boolean", ...options }),
	Null: (options = {}) => ({ type: "null", ...options }),
	Any: (options = {}) => ({ ...options }),
	Unknown: (options = {}) => ({ ...options }),
	Array: (items, options = {}) => ({ type: "array", items, ...options }),
	Union: (anyOf, options = {}) => ({ anyOf, ...options }),
	Intersect: (allOf, options = {}) => ({ allOf, ...options }),
	Literal: (value, options = {}) => ({ type: typeof value, const: value, ...options }),
	Enum: (values, options = {}) => ({ enum: Object.values(values), ...options }),
	Record: (_key, value, options = {}) => ({ type: "object", additionalProperties: value, ...options }),
	Tuple: (items, options = {}) => ({ type: "array", prefixItems: items, minItems: items.length, maxItems: items.length, ...options }),
	Partial: (schema) => ({ ...schema, required: undefined }),
});

function StringEnum(values, options = {}) {
	return { type: "string", enum: [...values], ...options };
}

const codingAgent = schemaModule("@earendil-works/pi-coding-agent", {
	defineTool: (tool) => tool,
	isToolCallEventType: (name, event) => event?.toolName === name,
	Type,
	StringEnum,
});
const piAi = schemaModule("@earendil-works/pi-ai", { Type, StringEnum });
const typebox = schemaModule("typebox", { Type, default: Type });
const piTui = schemaModule("@earendil-works/pi-tui", {});
const agentCore = schemaModule("@earendil-works/pi-agent-core", {});

const virtualModules = {};
for (const scope of ["@earendil-works", "@mariozechner"]) {
	virtualModules[`${scope}/pi-coding-agent`] = codingAgent;
	virtualModules[`${scope}/pi-ai`] = piAi;
	virtualModules[`${scope}/pi-tui`] = piTui;
	virtualModules[`${scope}/pi-agent-core`] = agentCore;
}
virtualModules.typebox = typebox;
virtualModules["@sinclair/typebox"] = typebox;

// ----- loading -------------------------------------------------------------------------------------

function entryPoints(target) {
	if (!fs.statSync(target).isDirectory()) return [target];
	const manifest = path.join(target, "package.json");
	if (fs.existsSync(manifest)) {
		const entries = JSON.parse(fs.readFileSync(manifest, "utf8"))?.pi?.extensions;
		if (Array.isArray(entries) && entries.length) return entries.map((entry) => path.resolve(target, entry));
	}
	for (const name of ["index.ts", "index.js"]) {
		if (fs.existsSync(path.join(target, name))) return [path.join(target, name)];
	}
	throw new Error(`${target}: no index.ts, index.js or package.json with pi.extensions`);
}

async function load(target) {
	const createJiti = require("./jiti/lib/jiti.cjs");
	const jiti = createJiti(import.meta.url, { virtualModules, interopDefault: true, moduleCache: false });
	for (const entry of entryPoints(target)) {
		const factory = await jiti.import(entry, { default: true });
		if (typeof factory !== "function") throw new Error(`${entry}: the default export is not a function`);
		await factory(pi);
	}
}

// ----- requests from pi -----------------------------------------------------------------------

const running = new Map();

function chain(type, event, result) {
	if (!result) return;
	if (type === "input" && result.action === "transform") {
		event.text = result.text;
		if (result.images) event.images = result.images;
	}
	if (type === "tool_result") for (const key of ["content", "details", "isError"]) if (key in result) event[key] = result[key];
	if (type === "context" && result.messages) event.messages = result.messages;
	if (type === "before_agent_start" && result.systemPrompt) event.systemPrompt = result.systemPrompt;
	if (type === "message_end" && result.message) event.message = result.message;
}

async function runEvent(event) {
	const type = event.type;
	const list = handlers.get(type) ?? [];
	const ctx = makeContext(undefined);
	const originalInput = type === "tool_call" ? JSON.stringify(event.input) : undefined;
	const originalText = event.text;
	let merged;
	for (const handler of list) {
		const result = await handler(event, ctx);
		if (!result || typeof result !== "object") continue;
		if (result.block || result.cancel || (type === "input" && result.action === "handled")) return result;
		chain(type, event, result);
		merged = { ...(merged ?? {}), ...result };
	}
	if (type === "tool_call" && JSON.stringify(event.input) !== originalInput) return { ...(merged ?? {}), input: event.input };
	if (type === "input") return event.text !== originalText ? { action: "transform", text: event.text, images: event.images } : merged;
	return merged;
}

async function runTool(id, message) {
	const tool = tools.get(message.toolName);
	if (!tool) throw new Error(`no tool ${message.toolName}`);
	const controller = new AbortController();
	running.set(id, controller);
	try {
		const onUpdate = (partial) => send({ type: "tool_update", id, partialResult: partial });
		const result = await tool.execute(message.toolCallId, message.params, controller.signal, onUpdate, makeContext(controller.signal));
		return { content: result?.content ?? [], details: result?.details };
	} finally {
		running.delete(id);
	}
}

let inFlight = 0;
let closed = false;
function exitWhenDone() {
	if (closed && inFlight === 0) process.exit(0);
}

async function answer(id, work) {
	inFlight++;
	try {
		await loading;
		await refresh();
		const result = await work();
		await effects;
		send({ type: "response", id, result: result ?? null });
	} catch (error) {
		await effects;
		send({ type: "response", id, error: error instanceof Error ? error.message : String(error) });
	} finally {
		inFlight--;
		exitWhenDone();
	}
}

const loading = load(process.argv[2]).then(
	() => null,
	(error) => error,
);

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", async (line) => {
	if (!line.trim()) return;
	let message;
	try {
		message = JSON.parse(line);
	} catch {
		return toStderr(`not JSON from pi: ${line.slice(0, 80)}`);
	}
	switch (message.type) {
		case "hello": {
			hello = { ...hello, ...message };
			const failure = await loading;
			if (failure) {
				toStderr(`failed to load ${process.argv[2]}: ${failure.stack ?? failure.message ?? failure}`);
				toStderr(`failed to load: ${failure.message ?? failure}`);
				process.exit(1);
			}
			const known = new Set(message.events ?? []);
			send({
				type: "register",
				protocol: 1,
				name: path.basename(process.argv[2] ?? "extension"),
				events: [...handlers.keys()].filter((name) => known.size === 0 || known.has(name)),
				tools: [...tools.values()].map((tool) => ({
					name: tool.name,
					label: tool.label,
					description: tool.description ?? "",
					parameters: tool.parameters ? JSON.parse(JSON.stringify(tool.parameters)) : undefined,
					promptSnippet: tool.promptSnippet,
					promptGuidelines: tool.promptGuidelines,
				})),
				commands: [...commands.entries()].map(([name, options]) => ({ name, description: options?.description })),
			});
			break;
		}
		case "event":
			answer(message.id, () => runEvent(message.event));
			break;
		case "execute_tool":
			answer(message.id, () => runTool(message.id, message));
			break;
		case "command":
			answer(message.id, async () => {
				const command = commands.get(message.name);
				if (!command) throw new Error(`no command /${message.name}`);
				await command.handler(message.args ?? "", makeContext(undefined));
				return null;
			});
			break;
		case "cancel":
			running.get(message.id)?.abort();
			break;
		case "return": {
			const pending = pendingCalls.get(message.id);
			if (!pending) break;
			pendingCalls.delete(message.id);
			if (message.error !== undefined) pending.reject(new Error(message.error));
			else pending.resolve(message.value);
			break;
		}
		default:
			toStderr(`unknown message from pi: ${message.type}`);
	}
});
// pi closes stdin to end the extension: finish what is running, then exit.
lines.on("close", () => {
	closed = true;
	exitWhenDone();
});
