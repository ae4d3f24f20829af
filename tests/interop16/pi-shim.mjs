#!/usr/bin/env node
// Stands in for the reference's `dist/cli.js` so that its RpcClient (which always spawns
// `node CLI --mode rpc …`) drives pi instead: runs $PI_RUST_BIN with the same arguments and
// stdio, forwards termination signals, and exits as pi exits.

import { spawn } from "node:child_process";

const bin = process.env.PI_RUST_BIN;
if (!bin) {
	process.stderr.write("pi-shim.mjs: PI_RUST_BIN is not set\n");
	process.exit(2);
}
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGTERM", "SIGHUP", "SIGINT"]) {
	process.on(signal, () => child.kill(signal));
}
child.on("error", (err) => {
	process.stderr.write(`pi-shim.mjs: ${err.message}\n`);
	process.exit(1);
});
child.on("exit", (code, signal) => {
	process.exit(code ?? (signal === "SIGTERM" ? 143 : 1));
});
