// 1.6.0's own credential code against a test's OAuth server:
//
//   node oauth16.mjs <auth.json>      (OAUTH_BASE=http://127.0.0.1:<port>)
//
// Reads the Anthropic credential through 1.6.0's AuthStorage (auth.json under proper-lockfile's
// lock), refreshes it with 1.6.0's refreshStoredOAuthCredential and Anthropic OAuth code, and
// prints {"before": <credential read>, "after": <credential stored>}. Only `fetch` is changed:
// requests to Anthropic's OAuth hosts go to OAUTH_BASE instead.

import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = (name) => path.join(here, "node_modules/@earendil-works", name, "dist");
const { AuthStorage } = await import(path.join(pkg("pi-coding-agent"), "core/auth-storage.js"));
const { refreshStoredOAuthCredential } = await import(path.join(pkg("pi-ai"), "auth/resolve.js"));
const { anthropicOAuth } = await import(path.join(pkg("pi-ai"), "auth/oauth/anthropic.js"));

const base = process.env.OAUTH_BASE;
const realFetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
	const url = String(input instanceof Request ? input.url : input).replace(
		/^https:\/\/(platform\.claude\.com|claude\.ai)/,
		base,
	);
	return realFetch(url, init);
};

const store = AuthStorage.create(process.argv[2]);
const before = await store.read("anthropic");
const after = await refreshStoredOAuthCredential(
	store,
	"anthropic",
	anthropicOAuth,
	() => true,
	AbortSignal.timeout(20_000),
);
console.log(JSON.stringify({ before, after }));
