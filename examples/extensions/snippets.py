#!/usr/bin/env python3
"""pi extension: expand `;;name rest` snippets in prompts before they are sent.

    ;;fix parser.rs      ->  Find the bug in parser.rs and fix it. Explain the cause first.
    ;;test parser.rs     ->  Write tests for parser.rs that would have caught the last bug.
    ;;ping               ->  handled here: pi answers with a notification, nothing is sent.

    pi -e examples/extensions/snippets.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from pi_extension import Extension  # noqa: E402

SNIPPETS = {
    "fix": "Find the bug in {rest} and fix it. Explain the cause first.",
    "test": "Write tests for {rest} that would have caught the last bug.",
}

ext = Extension("snippets")


@ext.on("input")
def expand(event):
    text = event["text"]
    if not text.startswith(";;"):
        return {"action": "continue"}
    name, _, rest = text[2:].partition(" ")
    if name == "ping":
        ext.notify("pong")
        return {"action": "handled"}
    template = SNIPPETS.get(name)
    if template is None:
        return {"action": "continue"}
    return {"action": "transform", "text": template.format(rest=rest.strip())}


if __name__ == "__main__":
    ext.run()
