#!/usr/bin/env node
// Drives an agent in RPC mode with the reference's own RpcClient (the pinned
// @earendil-works/pi-coding-agent of package.json) through one fixed scenario, for
// tests/suite/rpc_interop.rs. The same scenario runs against the reference CLI and against
// pi (through pi-shim.mjs, since RpcClient always spawns `node CLI --mode rpc …`).
//
//   node rpc-scenario.mjs SPEC.json
//
// SPEC.json: {"cli": PATH, "cwd": DIR, "env": {NAME: VALUE}, "args": [...]}.
// Prints one JSON object: every answer of the scenario, by step name, plus the events seen.

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const { RpcClient } = await import("@earendil-works/pi-coding-agent");

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const client = new RpcClient({ cliPath: spec.cli, cwd: spec.cwd, env: spec.env, args: spec.args });
const events = [];
client.onEvent((event) => {
	process.stderr.write(`  event ${event.type}${event.type === "message_end" ? ` ${JSON.stringify(event.message).slice(0, 300)}` : ""}\n`);
	// Streaming partials are left out: the reference serialises some of them after the
	// message has grown further, so only the kind of each update is compared.
	if (event.type === "message_update") {
		events.push(`message_update:${event.assistantMessageEvent?.type}`);
	} else if (event.type === "queue_update" || event.type === "thinking_level_changed" || event.type === "session_info_changed") {
		events.push(event);
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
/** Runs a prompt to its agent_end and returns the final messages of the run. */
const promptAndWait = async (message) => {
	const collected = await client.promptAndWait(message);
	return collected.at(-1).messages;
};

await client.start();
try {
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
		await client.prompt("Start the long job.");
		await started;
		const busy = await client.send({ type: "prompt", message: "Again" });
		await client.steer("Steer me");
		await client.followUp("Then this");
		const state = await client.getState();
		writeFileSync(join(spec.cwd, "go"), "");
		await done;
		return { busy, isStreaming: state.isStreaming, pendingMessageCount: state.pendingMessageCount };
	});
	await step("messagesAfterBusyRun", () => client.getMessages());
	await step("stateAfterBusyRun", () => client.getState());
} finally {
	await client.stop();
}
out.events = events;
out.stderr = client.getStderr();
process.stdout.write(`${JSON.stringify(out)}\n`);
