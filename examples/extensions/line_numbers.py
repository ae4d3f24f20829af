#!/usr/bin/env python3
"""pi extension: number the lines of `read` results, so the model can cite them.

The numbers start at the `offset` the model asked for; the notice `read` appends when it
truncates ("[Showing lines …]") is left as it is.

    pi -e examples/extensions/line_numbers.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from pi_extension import Extension  # noqa: E402

ext = Extension("line-numbers")


def number(text, first):
    lines = text.split("\n")
    notice = []
    if len(lines) >= 2 and lines[-1].startswith("[") and lines[-1].endswith("]") and lines[-2] == "":
        notice = lines[-2:]
        lines = lines[:-2]
    ending = []
    if len(lines) > 1 and lines[-1] == "":
        ending = [""]
        lines = lines[:-1]
    width = len(str(first + len(lines) - 1))
    numbered = ["%*d  %s" % (width, first + idx, line) for idx, line in enumerate(lines)]
    return "\n".join(numbered + ending + notice)


@ext.on("tool_result")
def add_line_numbers(event):
    if event["toolName"] != "read" or event["isError"]:
        return None
    first = event["input"].get("offset") or 1
    content = []
    for block in event["content"]:
        if block.get("type") == "text":
            block = dict(block, text=number(block["text"], int(first)))
        content.append(block)
    return {"content": content}


if __name__ == "__main__":
    ext.run()
