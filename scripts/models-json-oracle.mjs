#!/usr/bin/env node
// Asks the reference implementation what it makes of each models.json under
// fixtures/providers/models-json/, writing `<name>.expected.json` next to it.
//
// Usage (the environment is cleared so that only the variables below exist):
//   env -i PATH="$PATH" PI_CODING_AGENT_PKG=/path/to/node_modules/@mariozechner/pi-coding-agent \
//     node scripts/models-json-oracle.mjs
//
// Recorded per file: the load error (the file path replaced by `<path>`), the number of
// models, every model that differs from the built-in table or is new (registry order), and
// for each of those what `getApiKeyAndHeaders` resolves with an empty auth.json and the
// environment below (commands run for real; `~/.team-token` does not exist).
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const ORACLE_ENV = {
    LOCAL_KEY: "local-secret",
    MY_API_KEY: "my-secret",
    PORTKEY_API_KEY: "portkey-secret",
    ANTHROPIC_PROXY_KEY: "proxy-secret",
    AI_GATEWAY_API_KEY: "gateway-secret",
};

const pkg = process.env.PI_CODING_AGENT_PKG;
if (!pkg) {
    console.error("set PI_CODING_AGENT_PKG to the reference package directory (…/@mariozechner/pi-coding-agent)");
    process.exit(2);
}
process.env.HOME = mkdtempSync(join(tmpdir(), "pi-oracle-home-"));
Object.assign(process.env, ORACLE_ENV);
const { ModelRegistry } = await import(pathToFileURL(join(pkg, "dist", "core", "model-registry.js")).href);
const { AuthStorage } = await import(pathToFileURL(join(pkg, "dist", "core", "auth-storage.js")).href);

const dir = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "providers", "models-json");
const builtin = new ModelRegistry(AuthStorage.inMemory({}), undefined).getAll();
const builtinJson = new Map(builtin.map((m) => [`${m.provider}/${m.id}`, JSON.stringify(m)]));

for (const file of readdirSync(dir).filter((f) => f.endsWith(".json") && !f.endsWith(".expected.json") && !f.endsWith(".catalog.json")).sort()) {
    const path = join(dir, file);
    const registry = new ModelRegistry(AuthStorage.inMemory({}), path);
    const models = registry.getAll();
    const changed = models.filter((m) => builtinJson.get(`${m.provider}/${m.id}`) !== JSON.stringify(m));
    const auth = {};
    for (const model of changed) {
        const result = await registry.getApiKeyAndHeaders(model);
        auth[`${model.provider}/${model.id}`] = result;
    }
    const error = registry.getError();
    const expected = {
        error: error === undefined ? null : error.split(path).join("<path>"),
        count: models.length,
        changed: JSON.parse(JSON.stringify(changed)),
        auth,
    };
    writeFileSync(join(dir, file.replace(/\.json$/, ".expected.json")), JSON.stringify(expected, null, 2) + "\n");
    console.error(`${file}: ${models.length} models, ${changed.length} changed${error ? `, error: ${error.split("\n")[0]}` : ""}`);
}
