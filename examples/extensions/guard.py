#!/usr/bin/env python3
"""pi extension: ask before `bash` runs `rm -rf` or `git push --force`.

With a UI (the REPL, or an RPC client) the user confirms or refuses; in the non-interactive
modes (print, JSON) nobody can confirm, so the call is blocked and the model is told why.

    pi -e examples/extensions/guard.py
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from pi_extension import Extension  # noqa: E402

DANGEROUS = [
    (
        "rm -rf",
        re.compile(
            r"\brm\s+(?:-\w*[rR]\w*f\w*|-\w*f\w*[rR]\w*|-[rR]\s+-f|-f\s+-[rR]"
            r"|--recursive\s+--force|--force\s+--recursive)\b"
        ),
    ),
    (
        "git push --force",
        re.compile(r"\bgit\s+push\b[^;&|]*\s(?:--force(?:-with-lease)?|-f)\b"),
    ),
]

ext = Extension("guard")


@ext.on("tool_call")
def guard(event):
    if event["toolName"] != "bash":
        return None
    command = event["input"].get("command", "")
    for label, pattern in DANGEROUS:
        if not pattern.search(command):
            continue
        if not ext.has_ui:
            return {
                "block": True,
                "reason": "Blocked: `%s` needs the user's confirmation, and nobody can "
                "confirm in this mode. Ask the user to run it themselves." % label,
            }
        if ext.confirm("Dangerous command", "Allow `%s`?" % command):
            return None
        return {"block": True, "reason": "Blocked by the user: `%s` was not allowed." % label}
    return None


if __name__ == "__main__":
    ext.run()
