#!/usr/bin/env node
// A scripted model provider for driving the real reference CLI in tests: an HTTP server on
// 127.0.0.1 (a free port) that answers each request with the next response of a script and
// records every request it receives.
//
// Wire formats (chosen by the request path):
//   POST .../chat/completions   OpenAI chat completions, streamed as SSE ("data: {chunk}\n\n",
//                               ending with "data: [DONE]"), or one JSON body if the request
//                               has no "stream": true
//   POST .../messages           Anthropic Messages, streamed as SSE ("event: X\ndata: {...}\n\n")
//
// A script is a JSON array; request N gets response N. A response is an object:
//   {
//     "text": "answer",                  assistant text (streamed in chunks of `chunkSize` chars)
//     "reasoning": "thoughts",           OpenAI: delta.reasoning_content; Anthropic: a thinking block
//     "toolCalls": [{"id", "name", "arguments": {...}}],
//     "usage": {...},                    OpenAI: the usage object of the final chunk
//                                        ({prompt_tokens, completion_tokens, total_tokens,
//                                        prompt_tokens_details, completion_tokens_details});
//                                        Anthropic: {input_tokens, output_tokens, cache_read_input_tokens, ...}
//     "finishReason": "stop",            default "tool_calls" with toolCalls, else "stop"
//                                        (Anthropic stop_reason: default "tool_use" / "end_turn")
//     "model": "served-model-name",      the "model" field of the chunks (default: the requested model)
//     "id": "chatcmpl-...",              default chatcmpl-scripted-NNNN / msg_scripted_NNNN
//     "chunkSize": 16,
//     "cutAfterChunks": 3,               send this many content chunks, then destroy the socket
//     "status": 500, "headers": {...}, "body": {...}   an HTTP error response instead
//   }
// When the script is used up, the server answers 500 {"error": "script exhausted"}.
//
// Use from a program:
//   import { startScriptedServer } from "./scripted-server.mjs";
//   const server = await startScriptedServer(script);   // { port, baseUrl, requests, close() }
// requests: [{method, path, body}] in arrival order (body parsed as JSON when it is JSON).
//
// Or standalone: node scripted-server.mjs SCRIPT.json [REQUESTS_OUT.json]
//   prints the port on stdout, writes the recorded requests on SIGTERM/SIGINT.

import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";

function chunkString(s, size) {
	const out = [];
	for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
	return out;
}

/** The SSE events (strings without the trailing blank line) of one OpenAI chat-completions answer. */
function openaiEvents(resp, index, requestBody) {
	const id = resp.id ?? `chatcmpl-scripted-${String(index + 1).padStart(4, "0")}`;
	const model = resp.model ?? requestBody?.model ?? "scripted";
	const created = 1796033933 + index;
	const size = resp.chunkSize ?? 16;
	const base = { id, object: "chat.completion.chunk", created, model };
	const chunk = (delta, finish_reason = null, extra = {}) => ({
		...base,
		choices: [{ index: 0, delta, finish_reason }],
		...extra,
	});
	const events = [];
	events.push(chunk({ role: "assistant", content: "" }));
	for (const part of chunkString(resp.reasoning ?? "", size)) events.push(chunk({ reasoning_content: part }));
	for (const part of chunkString(resp.text ?? "", size)) events.push(chunk({ content: part }));
	(resp.toolCalls ?? []).forEach((call, i) => {
		const args = JSON.stringify(call.arguments ?? {});
		events.push(
			chunk({ tool_calls: [{ index: i, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] }),
		);
		for (const part of chunkString(args, size)) events.push(chunk({ tool_calls: [{ index: i, function: { arguments: part } }] }));
	});
	const finish = resp.finishReason ?? ((resp.toolCalls ?? []).length > 0 ? "tool_calls" : "stop");
	events.push(chunk({}, finish));
	if (resp.usage) events.push({ ...base, choices: [], usage: resp.usage });
	return events.map((e) => `data: ${JSON.stringify(e)}`).concat(["data: [DONE]"]);
}

/** One non-streamed OpenAI chat-completions body. */
function openaiBody(resp, index, requestBody) {
	const toolCalls = (resp.toolCalls ?? []).map((call) => ({
		id: call.id,
		type: "function",
		function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) },
	}));
	return {
		id: resp.id ?? `chatcmpl-scripted-${String(index + 1).padStart(4, "0")}`,
		object: "chat.completion",
		created: 1796033933 + index,
		model: resp.model ?? requestBody?.model ?? "scripted",
		choices: [
			{
				index: 0,
				message: {
					role: "assistant",
					content: resp.text ?? null,
					...(resp.reasoning ? { reasoning_content: resp.reasoning } : {}),
					...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
				},
				finish_reason: resp.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
			},
		],
		...(resp.usage ? { usage: resp.usage } : {}),
	};
}

/** The SSE events of one Anthropic Messages answer. */
function anthropicEvents(resp, index, requestBody) {
	const id = resp.id ?? `msg_scripted_${String(index + 1).padStart(4, "0")}`;
	const model = resp.model ?? requestBody?.model ?? "scripted";
	const size = resp.chunkSize ?? 16;
	const usage = resp.usage ?? { input_tokens: 0, output_tokens: 0 };
	const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}`;
	const events = [];
	events.push(
		ev("message_start", {
			message: {
				id,
				type: "message",
				role: "assistant",
				model,
				content: [],
				stop_reason: null,
				stop_sequence: null,
				usage: { ...usage, output_tokens: 1 },
			},
		}),
	);
	let block = 0;
	if (resp.reasoning) {
		events.push(ev("content_block_start", { index: block, content_block: { type: "thinking", thinking: "", signature: "" } }));
		for (const part of chunkString(resp.reasoning, size))
			events.push(ev("content_block_delta", { index: block, delta: { type: "thinking_delta", thinking: part } }));
		events.push(
			ev("content_block_delta", {
				index: block,
				delta: { type: "signature_delta", signature: resp.signature ?? `sig-scripted-${index + 1}` },
			}),
		);
		events.push(ev("content_block_stop", { index: block }));
		block++;
	}
	if (resp.text) {
		events.push(ev("content_block_start", { index: block, content_block: { type: "text", text: "" } }));
		for (const part of chunkString(resp.text, size))
			events.push(ev("content_block_delta", { index: block, delta: { type: "text_delta", text: part } }));
		events.push(ev("content_block_stop", { index: block }));
		block++;
	}
	for (const call of resp.toolCalls ?? []) {
		events.push(
			ev("content_block_start", { index: block, content_block: { type: "tool_use", id: call.id, name: call.name, input: {} } }),
		);
		for (const part of chunkString(JSON.stringify(call.arguments ?? {}), size))
			events.push(ev("content_block_delta", { index: block, delta: { type: "input_json_delta", partial_json: part } }));
		events.push(ev("content_block_stop", { index: block }));
		block++;
	}
	const stop = resp.finishReason ?? ((resp.toolCalls ?? []).length > 0 ? "tool_use" : "end_turn");
	events.push(ev("message_delta", { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: usage.output_tokens ?? 0 } }));
	events.push(ev("message_stop", {}));
	return events;
}

export function startScriptedServer(script, { log } = {}) {
	const requests = [];
	let next = 0;
	const server = createServer((req, res) => {
		const chunks = [];
		req.on("data", (c) => chunks.push(c));
		req.on("end", () => {
			const raw = Buffer.concat(chunks).toString("utf8");
			let body = raw;
			try {
				body = raw.length > 0 ? JSON.parse(raw) : null;
			} catch {
				// keep the raw text
			}
			const index = next++;
			requests.push({ method: req.method, path: req.url, body });
			const resp = script[index];
			log?.(`request ${index + 1} ${req.method} ${req.url} -> ${resp ? (resp.status ?? (resp.cutAfterChunks !== undefined ? "cut" : 200)) : "exhausted"}`);
			if (!resp) {
				res.writeHead(500, { "content-type": "application/json" });
				res.end(JSON.stringify({ error: { message: "script exhausted", type: "server_error" } }));
				return;
			}
			if (resp.status !== undefined && resp.status !== 200) {
				res.writeHead(resp.status, { "content-type": "application/json", ...(resp.headers ?? {}) });
				res.end(JSON.stringify(resp.body ?? { error: { message: `scripted ${resp.status}`, type: "server_error" } }));
				return;
			}
			const anthropic = /\/messages(\?|$)/.test(req.url ?? "");
			const streamed = body && typeof body === "object" && body.stream === true;
			if (!anthropic && !streamed) {
				res.writeHead(200, { "content-type": "application/json" });
				res.end(JSON.stringify(openaiBody(resp, index, body)));
				return;
			}
			const events = anthropic ? anthropicEvents(resp, index, body) : openaiEvents(resp, index, body);
			res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
			if (res.flushHeaders) res.flushHeaders();
			// The first event is the preamble (role / message_start); cutAfterChunks counts the rest.
			const limit = resp.cutAfterChunks === undefined ? events.length : 1 + resp.cutAfterChunks;
			let i = 0;
			const pump = () => {
				if (i >= limit) {
					if (resp.cutAfterChunks !== undefined) {
						// A connection lost mid-answer: no final chunk, no [DONE], the socket just dies.
						res.socket?.destroy();
					} else res.end();
					return;
				}
				res.write(`${events[i++]}\n\n`);
				setImmediate(pump);
			};
			pump();
		});
	});
	return new Promise((resolve, reject) => {
		server.once("error", reject);
		server.listen(0, "127.0.0.1", () => {
			const { port } = server.address();
			resolve({
				port,
				baseUrl: `http://127.0.0.1:${port}`,
				requests,
				remaining: () => script.length - next,
				close: () =>
					new Promise((r) => {
						server.closeAllConnections?.();
						server.close(() => r());
					}),
			});
		});
	});
}

if (import.meta.url === `file://${process.argv[1]}`) {
	const [scriptFile, outFile] = process.argv.slice(2);
	if (!scriptFile) {
		process.stderr.write("usage: node scripted-server.mjs SCRIPT.json [REQUESTS_OUT.json]\n");
		process.exit(2);
	}
	const server = await startScriptedServer(JSON.parse(readFileSync(scriptFile, "utf8")), {
		log: (m) => process.stderr.write(`${m}\n`),
	});
	process.stdout.write(`${server.port}\n`);
	const stop = async () => {
		if (outFile) writeFileSync(outFile, `${JSON.stringify(server.requests, null, 2)}\n`);
		await server.close();
		process.exit(0);
	};
	process.on("SIGTERM", stop);
	process.on("SIGINT", stop);
}
