#!/usr/bin/env node
// 1.6.0's own project trust (dist/core/trust-manager.js), for tests/suite/trust.rs: its
// ProjectTrustStore reads and writes <agent dir>/trust.json (with its proper-lockfile lock), and
// hasTrustRequiringProjectResources says whether a folder needs a decision.
//
//   node22 tests/interop16/trust16.mjs get AGENT_DIR CWD             → {"decision":…,"entry":…}
//   node22 tests/interop16/trust16.mjs set AGENT_DIR CWD true|false|null
//   node22 tests/interop16/trust16.mjs protected CWD                  → true|false

import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, "node_modules/@earendil-works/pi-coding-agent/dist");
const { ProjectTrustStore, hasTrustRequiringProjectResources } = await import(
	pathToFileURL(join(pkg, "core/trust-manager.js")).href
);

const [command, ...rest] = process.argv.slice(2);
switch (command) {
	case "get": {
		const store = new ProjectTrustStore(rest[0]);
		console.log(JSON.stringify({ decision: store.get(rest[1]), entry: store.getEntry(rest[1]) }));
		break;
	}
	case "set": {
		const store = new ProjectTrustStore(rest[0]);
		store.set(rest[1], JSON.parse(rest[2]));
		break;
	}
	case "protected":
		console.log(JSON.stringify(hasTrustRequiringProjectResources(rest[0])));
		break;
	default:
		console.error(`unknown command ${command}`);
		process.exit(2);
}
