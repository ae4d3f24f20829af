#!/usr/bin/env python3
"""Writes the `bedrock-*.eventstream` response bodies of fixtures/providers/ from the
`bedrock-*.events.json` next to them: each event is an AWS event-stream message
(`application/vnd.amazon.eventstream`: total length, headers length, prelude CRC32, string
headers, the JSON payload, message CRC32), as Bedrock's ConverseStream sends them.

An entry is `{"event": <:event-type>, "payload": {...}}` (message type `event`),
`{"exception": <:exception-type>, "payload": {...}}` (message type `exception`), or
`{"error": <:error-code>, "message": <:error-message>}` (message type `error`, no payload).

Usage: python3 scripts/gen-eventstream.py   (rewrites every body)
"""
import json
import pathlib
import struct
import zlib

DIR = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "providers"


def header(name, value):
    name = name.encode()
    value = value.encode()
    return bytes([len(name)]) + name + bytes([7]) + struct.pack(">H", len(value)) + value


def message(headers, payload):
    encoded = b"".join(header(name, value) for name, value in headers)
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", zlib.crc32(body))


def frame(entry):
    if "event" in entry:
        payload = json.dumps(entry["payload"], separators=(",", ":")).encode()
        headers = [(":event-type", entry["event"]), (":content-type", "application/json"), (":message-type", "event")]
        return message(headers, payload)
    if "exception" in entry:
        payload = json.dumps(entry["payload"], separators=(",", ":")).encode()
        headers = [(":exception-type", entry["exception"]), (":content-type", "application/json"), (":message-type", "exception")]
        return message(headers, payload)
    headers = [(":error-code", entry["error"]), (":error-message", entry["message"]), (":message-type", "error")]
    return message(headers, b"")


for source in sorted(DIR.glob("bedrock-*.events.json")):
    events = json.loads(source.read_text())
    out = source.with_name(source.name.replace(".events.json", ".eventstream"))
    out.write_bytes(b"".join(frame(entry) for entry in events))
    print(f"{out.name}: {len(events)} messages")
