#!/usr/bin/env node
// Regenerates src/ai/builtin_models.json from the reference package's model table.
//
// Usage:
//   PI_AI_PKG=/path/to/node_modules/@mariozechner/pi-ai node scripts/gen-models.mjs
//
// Writes one model object per line, in the reference registry's order (providers in the
// order `getProviders()` returns them, models in their generated order), with the
// reference's own field names and values. The Rust side embeds the file with
// `include_str!` (src/ai/models.rs); nothing here is edited by hand.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const pkg = process.env.PI_AI_PKG;
if (!pkg) {
    console.error("set PI_AI_PKG to the reference package directory (…/node_modules/@mariozechner/pi-ai)");
    process.exit(2);
}
const { getProviders, getModels } = await import(pathToFileURL(join(pkg, "dist", "models.js")).href);
const { version } = JSON.parse(
    (await import("node:fs")).readFileSync(join(pkg, "package.json"), "utf-8"),
);

const lines = [];
for (const provider of getProviders()) {
    for (const model of getModels(provider)) {
        lines.push(JSON.stringify(model));
    }
}
const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "src", "ai", "builtin_models.json");
writeFileSync(out, `{"source":"@mariozechner/pi-ai ${version}","models":[\n${lines.join(",\n")}\n]}\n`);
console.error(`wrote ${lines.length} models to ${out}`);
