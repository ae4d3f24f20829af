"""A small helper for writing pi extensions in Python (protocol 1; see docs/extensions.md).

An extension is a program that pi starts once per session. It reads JSON lines on stdin and
writes JSON lines on stdout; stderr is free text (pi shows its last line when the extension
fails). This module hides the framing:

    from pi_extension import Extension

    ext = Extension("guard")

    @ext.on("tool_call")
    def check(event):
        if "rm -rf" in event["input"].get("command", ""):
            return {"block": True, "reason": "no"}

    ext.run()

Handlers return the result object of their event (or None). Calls into pi (`ext.call(...)` and
the helpers below) wait for pi's answer; while waiting, events that pi sends are handled as
they arrive, so a handler may call pi and pi may call back into the extension.
"""

import json
import sys

PROTOCOL = 1


class PiError(Exception):
    """A call into pi failed (pi answered with an error)."""


class _Stop(Exception):
    pass


class Extension:
    def __init__(self, name=None):
        self.name = name
        self.hello = {}
        self._handlers = {}
        self._tools = {}
        self._commands = {}
        self._next_call = 0
        self._cancelled = set()

    # ----- registration ---------------------------------------------------------------

    def on(self, event):
        """Decorator: handle `event` (several handlers run in order; the last non-None
        result is the answer)."""

        def register(handler):
            self._handlers.setdefault(event, []).append(handler)
            return handler

        return register

    def tool(self, name, description, parameters=None, label=None, prompt_snippet=None):
        """Decorator: register a tool. The function gets (params, call) where `call` has
        `id`, `update(text)` and `cancelled()`; it returns text or a {content, details}
        object, or raises to report an error to the model."""

        def register(handler):
            spec = {
                "name": name,
                "label": label or name,
                "description": description,
                "parameters": parameters or {"type": "object", "properties": {}},
            }
            if prompt_snippet:
                spec["promptSnippet"] = prompt_snippet
            self._tools[name] = (spec, handler)
            return handler

        return register

    def command(self, name, description=None):
        """Decorator: register a slash command; the function gets the text after the name."""

        def register(handler):
            self._commands[name] = (description, handler)
            return handler

        return register

    # ----- calls into pi ----------------------------------------------------------------

    @property
    def has_ui(self):
        return bool(self.hello.get("hasUI"))

    @property
    def cwd(self):
        return self.hello.get("cwd")

    def call(self, method, **params):
        self._next_call += 1
        call_id = "c%d" % self._next_call
        self._send({"type": "call", "id": call_id, "method": method, "params": params})
        while True:
            message = self._read()
            if message.get("type") == "return" and message.get("id") == call_id:
                if message.get("error") is not None:
                    raise PiError(message["error"])
                return message.get("value")
            self._dispatch(message)

    def append_entry(self, custom_type, data=None):
        return self.call("appendEntry", customType=custom_type, data=data)

    def send_message(self, custom_type, content, display=True, details=None, **options):
        message = {"customType": custom_type, "content": content, "display": display}
        if details is not None:
            message["details"] = details
        return self.call("sendMessage", message=message, options=options)

    def send_user_message(self, content, deliver_as=None):
        options = {"deliverAs": deliver_as} if deliver_as else {}
        return self.call("sendUserMessage", content=content, options=options)

    def notify(self, message, kind="info"):
        return self.call("notify", message=message, type=kind)

    def confirm(self, title, message, timeout=None):
        return self.call("confirm", title=title, message=message, timeout=timeout)

    def select(self, title, options, timeout=None):
        return self.call("select", title=title, options=options, timeout=timeout)

    def input(self, title, placeholder=None, timeout=None):
        return self.call("input", title=title, placeholder=placeholder, timeout=timeout)

    def editor(self, title, prefill=None):
        return self.call("editor", title=title, prefill=prefill)

    def set_status(self, key, text=None):
        return self.call("setStatus", key=key, text=text)

    def set_widget(self, key, lines=None, placement="aboveEditor"):
        return self.call("setWidget", key=key, lines=lines, placement=placement)

    def set_title(self, title):
        return self.call("setTitle", title=title)

    def set_editor_text(self, text):
        return self.call("setEditorText", text=text)

    def get_entries(self):
        return self.call("getEntries")

    def get_branch(self):
        return self.call("getBranch")

    def exec(self, command, args=(), **options):
        return self.call("exec", command=command, args=list(args), options=options)

    # ----- the loop ---------------------------------------------------------------------

    def run(self):
        """Handshake, then serve pi until it closes stdin."""
        try:
            hello = self._read()
            if hello.get("type") != "hello":
                raise SystemExit("pi_extension: expected hello, got %r" % hello.get("type"))
            self.hello = hello
            self._send(
                {
                    "type": "register",
                    "protocol": PROTOCOL,
                    "name": self.name,
                    "events": list(self._handlers),
                    "tools": [spec for spec, _ in self._tools.values()],
                    "commands": [
                        {"name": name, "description": description}
                        for name, (description, _) in self._commands.items()
                    ],
                }
            )
            while True:
                self._dispatch(self._read())
        except _Stop:
            return

    def _read(self):
        line = sys.stdin.readline()
        if not line:
            raise _Stop()
        return json.loads(line)

    def _send(self, message):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def _answer(self, request_id, work):
        try:
            result = work()
        except PiError as error:
            self._send({"type": "response", "id": request_id, "error": str(error)})
        except _Stop:
            raise
        except Exception as error:  # a handler's failure is reported, not fatal
            text = str(error) or type(error).__name__
            self._send({"type": "response", "id": request_id, "error": text})
        else:
            self._send({"type": "response", "id": request_id, "result": result})

    def _dispatch(self, message):
        kind = message.get("type")
        if kind == "event":
            event = message["event"]

            def handle():
                result = None
                for handler in self._handlers.get(event.get("type"), []):
                    answer = handler(event)
                    if answer is not None:
                        result = answer
                return result

            self._answer(message["id"], handle)
        elif kind == "execute_tool":
            request_id = message["id"]
            _, handler = self._tools[message["toolName"]]
            extension = self

            class Call:
                id = message["toolCallId"]

                @staticmethod
                def update(text):
                    extension._send(
                        {
                            "type": "tool_update",
                            "id": request_id,
                            "partialResult": {"content": [{"type": "text", "text": text}]},
                        }
                    )

                @staticmethod
                def cancelled():
                    return request_id in extension._cancelled

            def run_tool():
                result = handler(message.get("params") or {}, Call)
                if isinstance(result, str):
                    return {"content": [{"type": "text", "text": result}]}
                return result

            self._answer(request_id, run_tool)
        elif kind == "command":
            _, handler = self._commands[message["name"]]

            def run_command():
                handler(message.get("args", ""))
                return None

            self._answer(message["id"], run_command)
        elif kind == "cancel":
            self._cancelled.add(message.get("id"))
        # A stray `return` (for a call given up on) is ignored.
