// Writes session files with the reference's own SessionManager (the pinned 1.6.0), for
// tests/suite/autoimport.rs: sessions the reference writes must appear in pi on their own.
//
//   node session-writer.mjs SPEC.json
//
// SPEC is one operation:
//   {"op": "create", "cwd": DIR, "sessionDir": DIR?, "turns": [[USER, ANSWER], ...]}
//     a new session of DIR (in <agent dir>/sessions/--<cwd>--/ unless sessionDir is given;
//     PI_CODING_AGENT_DIR names the agent dir), one user and one assistant message per turn
//   {"op": "append", "file": FILE, "turns": [...]}
//     opens FILE as the reference resumes it and appends the turns
// and prints {"file": ..., "id": ..., "entries": N} (N: entries in the file, header excluded).

import { readFileSync } from "node:fs";
import { SessionManager } from "@earendil-works/pi-coding-agent";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));

function assistant(text) {
  return {
    role: "assistant",
    content: [{ type: "text", text }],
    api: "openai-completions",
    provider: "mock",
    model: "mock-model",
    usage: {
      input: 10,
      output: 5,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 15,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: "stop",
    timestamp: Date.now(),
  };
}

let manager;
if (spec.op === "create") {
  manager = SessionManager.create(spec.cwd, spec.sessionDir);
} else if (spec.op === "append") {
  manager = SessionManager.open(spec.file);
} else {
  throw new Error(`unknown op ${spec.op}`);
}
for (const [question, answer] of spec.turns) {
  manager.appendMessage({ role: "user", content: question, timestamp: Date.now() });
  manager.appendMessage(assistant(answer));
}
const entries = readFileSync(manager.getSessionFile(), "utf8").trim().split("\n").length - 1;
console.log(
  JSON.stringify({ file: manager.getSessionFile(), id: manager.getSessionId(), entries }),
);
