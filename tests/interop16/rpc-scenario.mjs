#!/usr/bin/env node
// Drives an agent in RPC mode with the reference's own RpcClient (the pinned
// @earendil-works/pi-coding-agent of package.json) through one fixed scenario, for
// tests/suite/rpc_interop.rs. The same scenario runs against the reference CLI and against
// pi (through pi-shim.mjs, since RpcClient always spawns `node CLI --mode rpc …`).
//
//   node rpc-scenario.mjs SPEC.json
//
// SPEC.json: {"cli": PATH, "cwd": DIR, "env": {NAME: VALUE}, "args": [...], "scenario": NAME}.
// Prints one JSON object: every answer of the scenario, by step name, plus the events seen.
//
// Scenarios (`scenario`, default "main"):
//   main      prompts, state, models, thinking, names, fork/clone/new, commands, a busy run
//             with steer / follow-up, clear_queue, get_entries, get_tree
//   controls  set_steering_mode, set_follow_up_mode, set_auto_compaction, set_auto_retry,
//             abort / abort_retry / abort_bash while idle, export_html, switch_session
//   exclude   bash with and without excludeFromContext, then a prompt
//   retry     a 500 and a cut stream retried, set_auto_retry false, abort_retry of a waiting
//             retry, a threshold auto-compaction
//   abort     abort of a turn held in a tool call, abort_bash of a running bash
//   ui        an extension command asking the client through every dialog

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const { RpcClient } = await import("@earendil-works/pi-coding-agent");

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const client = new RpcClient({ cliPath: spec.cli, cwd: spec.cwd, env: spec.env, args: spec.args });
const scenario = spec.scenario ?? "main";
// Outside "main", the retry, compaction and extension UI events are kept whole (their ids
// aside) rather than by kind.
const detailed = new Set(
	scenario === "main" ? [] : ["auto_retry_start", "auto_retry_end", "compaction_start", "compaction_end", "extension_ui_request"],
);
const events = [];
let bashStream = "";
client.onEvent((event) => {
	process.stderr.write(`  event ${event.type}${event.type === "message_end" ? ` ${JSON.stringify(event.message).slice(0, 300)}` : ""}\n`);
	// Streaming partials are left out: the reference serialises some of them after the
	// message has grown further, so only the kind of each update is compared.
	if (event.type === "message_update") {
		events.push(`message_update:${event.assistantMessageEvent?.type}`);
	} else if (event.type === "bash_execution_update") {
		// How the output is split into chunks depends on timing: one entry per command, and
		// the streamed text whole.
		if (events.at(-1) !== event.type) events.push(event.type);
		bashStream += event.delta;
	} else if (event.type === "agent_end") {
		events.push(`agent_end:willRetry=${event.willRetry}`);
	} else if (event.type === "message_start" || event.type === "message_end") {
		events.push(`${event.type}:${event.message?.role}`);
	} else if (event.type === "queue_update" || event.type === "thinking_level_changed" || event.type === "session_info_changed") {
		events.push(event);
	} else if (detailed.has(event.type)) {
		events.push(event.id === undefined ? event : { ...event, id: "<id>" });
	} else {
		events.push(event.type);
	}
});

const out = {};
const step = async (name, run) => {
	// Progress on stderr, so that a step that never answers is named when the run is stopped.
	process.stderr.write(`step ${name}\n`);
	try {
		out[name] = await run();
	} catch (err) {
		out[name] = { error: err instanceof Error ? err.message : String(err) };
	}
	if (out[name] === undefined) out[name] = "(undefined)";
	process.stderr.write(`  answer ${JSON.stringify(out[name]).slice(0, 400)}\n`);
};
/**
 * Runs a prompt until it settles (1.6.0's promptAndWait waits for agent_settled); returns the
 * messages of the last agent_end and the settled event.
 */
const promptAndWait = async (message) => {
	const collected = await client.promptAndWait(message);
	return { messages: collected.findLast((event) => event.type === "agent_end")?.messages, settled: collected.at(-1) };
};

const scenarios = {};

scenarios.main = async () => {
	await step("state0", () => client.getState());
	await step("models", () => client.getAvailableModels());
	await step("run1", () => promptAndWait("List the files here."));
	await step("messages1", () => client.getMessages());
	await step("last1", () => client.getLastAssistantText());
	await step("stats1", () => client.getSessionStats());
	await step("compactSmall", () => client.compact());
	await step("bash", () => client.bash("printf 'one\\ntwo\\n'; exit 2"));
	await step("messagesAfterBash", async () => (await client.getMessages()).length);
	await step("cycleThinkingNoReasoning", () => client.cycleThinkingLevel());
	await step("setModel", () => client.setModel("mock", "mock-reasoner"));
	await step("setModelUnknown", () => client.setModel("mock", "nope"));
	await step("stateAfterModel", () => client.getState());
	await step("thinkingLevels", () => client.getAvailableThinkingLevels());
	await step("setThinkingHigh", () => client.setThinkingLevel("high"));
	await step("cycleThinking", () => client.cycleThinkingLevel());
	await step("setThinkingXhigh", () => client.setThinkingLevel("xhigh"));
	await step("stateAfterThinking", () => client.getState());
	await step("cycleModel", () => client.cycleModel());
	await step("setSessionName", () => client.setSessionName("  Equivalence run "));
	await step("setSessionNameEmpty", () => client.setSessionName("   "));
	await step("stateAfterName", () => client.getState());
	await step("run2", () => promptAndWait("Thanks!"));
	await step("last2", () => client.getLastAssistantText());
	await step("stats2", () => client.getSessionStats());
	await step("forkMessages", () => client.getForkMessages());
	await step("fork", () => client.fork(out.forkMessages[1].entryId));
	await step("messagesAfterFork", () => client.getMessages());
	await step("stateAfterFork", () => client.getState());
	await step("forkUnknown", () => client.fork("ffffffff"));
	await step("clone", () => client.clone());
	await step("stateAfterClone", () => client.getState());
	await step("newSession", () => client.newSession());
	await step("stateAfterNew", () => client.getState());
	await step("messagesAfterNew", () => client.getMessages());
	await step("lastAfterNew", () => client.getLastAssistantText());
	await step("forkMessagesAfterNew", () => client.getForkMessages());
	await step("commands", () => client.getCommands());
	// A turn held open by a tool call that waits for a file: a prompt without
	// streamingBehavior is refused, steering and follow-up messages queue and are delivered.
	await step("busyRun", async () => {
		const done = client.collectEvents();
		const started = new Promise((resolve) => {
			const stop = client.onEvent((event) => {
	process.stderr.write(`  event ${event.type}${event.type === "message_end" ? ` ${JSON.stringify(event.message).slice(0, 300)}` : ""}\n`);
				if (event.type === "tool_execution_start") {
					stop();
					resolve();
				}
			});
		});
		const disposition = await client.prompt("Start the long job.");
		await started;
		const busy = await client.send({ type: "prompt", message: "Again" });
		const steer = await client.steer("Steer me");
		const followUp = await client.followUp("Then this");
		const state = await client.getState();
		writeFileSync(join(spec.cwd, "go"), "");
		await done;
		return { disposition, busy, steer, followUp, isStreaming: state.isStreaming, pendingMessageCount: state.pendingMessageCount };
	});
	await step("messagesAfterBusyRun", () => client.getMessages());
	await step("stateAfterBusyRun", () => client.getState());
	await step("clearQueueIdle", () => client.clearQueue());
	await step("entries", () => client.getEntries());
	await step("entriesSince", () => client.getEntries(out.entries.entries[1].id));
	await step("entriesUnknown", () => client.getEntries("ffffffff"));
	await step("tree", () => client.getTree());
};

/** Resolves with the first event `predicate` accepts from now on. */
const waitFor = (predicate) =>
	new Promise((resolve) => {
		const stop = client.onEvent((event) => {
			if (predicate(event)) {
				stop();
				resolve(event);
			}
		});
	});
/** Sends a command as it is and returns the whole response record (errors included). */
const raw = (command) => client.send(command);
/** A turn held open by a tool call that waits for the file `go`: runs `during`, then releases it. */
const heldRun = async (message, during) => {
	const settled = waitFor((event) => event.type === "agent_settled");
	const started = waitFor((event) => event.type === "tool_execution_start");
	const disposition = await client.prompt(message);
	await started;
	const answers = await during();
	writeFileSync(join(spec.cwd, "go"), "");
	return { disposition, ...answers, settled: await settled };
};

scenarios.controls = async () => {
	await step("state0", () => client.getState());
	// Values outside the documented ones first, then the documented ones.
	await step("setSteeringBogus", () => raw({ type: "set_steering_mode", mode: "sometimes" }));
	await step("setAutoCompactionBogus", () => raw({ type: "set_auto_compaction", enabled: "yes" }));
	await step("stateAfterBogus", () => client.getState());
	await step("setSteeringAll", () => client.setSteeringMode("all"));
	await step("setFollowUpAll", () => client.setFollowUpMode("all"));
	await step("setAutoCompactionOff", () => client.setAutoCompaction(false));
	await step("setAutoRetryOff", () => client.setAutoRetry(false));
	await step("stateAfterModes", () => client.getState());
	await step("setAutoCompactionOn", () => client.setAutoCompaction(true));
	await step("setAutoRetryOn", () => client.setAutoRetry(true));
	await step("stateAfterModesBack", () => client.getState());
	await step("abortIdle", () => raw({ type: "abort" }));
	await step("abortRetryIdle", () => raw({ type: "abort_retry" }));
	await step("abortBashIdle", () => raw({ type: "abort_bash" }));
	await step("unknown", () => raw({ type: "nope" }));
	await step("run1", () => promptAndWait("Hello"));
	await step("first", () => client.getState());
	await step("messages1", () => client.getMessages());
	await step("exportHtml", () => raw({ type: "export_html", outputPath: join(spec.cwd, "session.html") }));
	await step("newSession", () => client.newSession());
	await step("stateAfterNew", () => client.getState());
	await step("switchBack", () => client.switchSession(out.first.sessionFile));
	await step("stateAfterSwitch", () => client.getState());
	await step("messagesAfterSwitch", () => client.getMessages());
	await step("switchMissing", () => raw({ type: "switch_session", sessionPath: join(spec.cwd, "missing.jsonl") }));
	await step("stateAfterSwitchMissing", () => client.getState());
	await step("switchBackAgain", () => client.switchSession(out.first.sessionFile));
	// Steering and follow-up in "all" mode: both steering messages reach the model in one
	// request, then both follow-ups in the next.
	await step("heldAll", () =>
		heldRun("Start the long job.", async () => ({
			steer: [await client.steer("Steer one"), await client.steer("Steer two")],
			followUp: [await client.followUp("Follow one"), await client.followUp("Follow two")],
			pending: (await client.getState()).pendingMessageCount,
		})),
	);
	await step("messagesAfterHeld", () => client.getMessages());
};

scenarios.exclude = async () => {
	await step("bashExcluded", () => raw({ type: "bash", command: "echo secret-output", excludeFromContext: true }));
	await step("bashIncluded", () => raw({ type: "bash", command: "echo visible-output" }));
	await step("bashExcludedFalse", () => raw({ type: "bash", command: "echo also-visible", excludeFromContext: false }));
	await step("messages", () => client.getMessages());
	await step("run", () => promptAndWait("What ran?"));
	await step("messagesAfterRun", () => client.getMessages());
	await step("entries", () => client.getEntries());
	await step("stats", () => client.getSessionStats());
};

scenarios.retry = async () => {
	// A 500, then an answer.
	await step("run500", () => promptAndWait("Hello"));
	// A stream cut mid-answer, then an answer.
	await step("runCut", () => promptAndWait("Again"));
	await step("setAutoRetryOff", () => client.setAutoRetry(false));
	// Not retried: the error is the answer.
	await step("runNoRetry", () => promptAndWait("Once more"));
	await step("setAutoRetryOn", () => client.setAutoRetry(true));
	await step("messages", () => client.getMessages());
	await step("stats", () => client.getSessionStats());
	// An answer reporting a nearly full context: compacted after the run (threshold).
	await step("runFull", () => promptAndWait("Fill it up"));
	await step("messagesAfterCompaction", () => client.getMessages());
	await step("stateAfterCompaction", () => client.getState());
	await step("statsAfterCompaction", () => client.getSessionStats());
};

scenarios.abortRetry = async () => {
	// A 500 whose retry waits (a long base delay): abort_retry ends the wait.
	await step("run", async () => {
		const settled = waitFor((event) => event.type === "agent_settled");
		const retrying = waitFor((event) => event.type === "auto_retry_start");
		const disposition = await client.prompt("Hello");
		await retrying;
		const state = await client.getState();
		await client.abortRetry();
		return { disposition, isStreaming: state.isStreaming, settled: await settled };
	});
	await step("messages", () => client.getMessages());
	await step("state", () => client.getState());
};

scenarios.abort = async () => {
	await step("abortRun", async () => {
		const settled = waitFor((event) => event.type === "agent_settled");
		const started = waitFor((event) => event.type === "tool_execution_start");
		const disposition = await client.prompt("Start the long job.");
		await started;
		const abort = await raw({ type: "abort" });
		const state = await client.getState();
		return { disposition, abort, isStreaming: state.isStreaming, settled: await settled };
	});
	await step("messagesAfterAbort", () => client.getMessages());
	await step("runAfterAbort", () => promptAndWait("Are you there?"));
	await step("abortBash", async () => {
		const streaming = waitFor((event) => event.type === "bash_execution_update");
		const result = client.bash("echo started; sleep 30; echo never");
		await streaming;
		const abort = await raw({ type: "abort_bash" });
		return { abort, result: await result };
	});
	await step("messagesAfterAbortBash", () => client.getMessages());
	await step("entries", () => client.getEntries());
};

scenarios.ui = async () => {
	const dialogs = { select: { value: "green" }, input: { value: "Ada" }, confirm: { confirmed: true }, editor: { value: "draft v2" } };
	let cancel = false;
	client.onEvent((event) => {
		if (event.type !== "extension_ui_request" || !dialogs[event.method]) return;
		const reply = cancel ? { cancelled: true } : dialogs[event.method];
		client.process.stdin.write(`${JSON.stringify({ type: "extension_ui_response", id: event.id, ...reply })}\n`);
	});
	const ask = async (message) => {
		const done = waitFor((event) => event.type === "extension_ui_request" && event.method === "set_editor_text");
		const disposition = await client.prompt(message);
		return { disposition, last: (await done).text };
	};
	await step("commands", () => client.getCommands());
	await step("ask", () => ask("/ask now"));
	await step("askCancelled", () => {
		cancel = true;
		return ask("/ask again");
	});
	await step("messages", () => client.getMessages());
	await step("state", () => client.getState());
};

const run = scenarios[scenario];
if (!run) throw new Error(`unknown scenario: ${scenario}`);
await client.start();
try {
	await run();
} finally {
	await client.stop();
}
out.events = events;
out.bashStream = bashStream;
out.stderr = client.getStderr();
process.stdout.write(`${JSON.stringify(out)}\n`);
