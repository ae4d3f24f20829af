//! A pi extension written in Rust (protocol 1, `docs/extensions.md`): a session counter.
//!
//! * the tool `counter` (`{by?: integer}`) adds to the counter and tells the model its value;
//! * the command `/count [n]` adds `n` (default 1) and shows the value as a notification;
//! * every change is stored as a `custom` entry (`customType: "counter"`, `data: {count}`),
//!   so on `session_start` — at startup, on resume, after a fork — the counter is read back
//!   from the session's active branch.
//!
//! Build and use it:
//!
//! ```text
//! cargo build --example counter_extension
//! pi -e target/debug/examples/counter_extension
//! ```
//!
//! The program only needs `serde_json`; it shows the whole protocol without a helper library:
//! the handshake, answering requests by id, and calling into pi while handling one (a call's
//! `return` may be preceded by requests from pi, which are handled as they come).

use std::io::{BufRead, Write};

use serde_json::{Value, json};

const CUSTOM_TYPE: &str = "counter";

struct Counter {
    input: std::io::StdinLock<'static>,
    output: std::io::StdoutLock<'static>,
    count: i64,
    next_call: u64,
}

enum Stop {
    /// pi closed stdin: exit quietly.
    Closed,
}

impl Counter {
    fn read(&mut self) -> Result<Value, Stop> {
        let mut line = String::new();
        loop {
            line.clear();
            match self.input.read_line(&mut line) {
                Ok(0) | Err(_) => return Err(Stop::Closed),
                Ok(_) if line.trim().is_empty() => continue,
                Ok(_) => match serde_json::from_str(&line) {
                    Ok(value) => return Ok(value),
                    Err(error) => {
                        eprintln!("counter: unreadable line from pi: {error}");
                        return Err(Stop::Closed);
                    }
                },
            }
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), Stop> {
        writeln!(self.output, "{message}")
            .and_then(|()| self.output.flush())
            .map_err(|_| Stop::Closed)
    }

    /// Calls a pi method and waits for its `return`, serving pi's requests meanwhile.
    fn call(&mut self, method: &str, params: Value) -> Result<Result<Value, String>, Stop> {
        self.next_call += 1;
        let id = format!("c{}", self.next_call);
        self.send(&json!({"type": "call", "id": id, "method": method, "params": params}))?;
        loop {
            let message = self.read()?;
            if message["type"] == "return" && message["id"] == id.as_str() {
                if let Some(error) = message["error"].as_str() {
                    return Ok(Err(error.to_owned()));
                }
                return Ok(Ok(message["value"].clone()));
            }
            self.dispatch(message)?;
        }
    }

    fn save(&mut self) -> Result<(), Stop> {
        let count = self.count;
        if let Err(error) = self.call(
            "appendEntry",
            json!({"customType": CUSTOM_TYPE, "data": {"count": count}}),
        )? {
            eprintln!("counter: could not save: {error}");
        }
        Ok(())
    }

    /// Reads the last saved count on the active branch.
    fn restore(&mut self) -> Result<(), Stop> {
        let branch = match self.call("getBranch", json!({}))? {
            Ok(Value::Array(entries)) => entries,
            Ok(_) => Vec::new(),
            Err(error) => {
                eprintln!("counter: could not read the session: {error}");
                Vec::new()
            }
        };
        self.count = branch
            .iter()
            .rev()
            .find(|entry| entry["type"] == "custom" && entry["customType"] == CUSTOM_TYPE)
            .and_then(|entry| entry["data"]["count"].as_i64())
            .unwrap_or(0);
        Ok(())
    }

    fn respond(&mut self, id: &Value, result: Result<Value, String>) -> Result<(), Stop> {
        let message = match result {
            Ok(result) => json!({"type": "response", "id": id, "result": result}),
            Err(error) => json!({"type": "response", "id": id, "error": error}),
        };
        self.send(&message)
    }

    fn dispatch(&mut self, message: Value) -> Result<(), Stop> {
        let id = message["id"].clone();
        match message["type"].as_str() {
            Some("event") => {
                if message["event"]["type"] == "session_start" {
                    self.restore()?;
                }
                self.respond(&id, Ok(Value::Null))
            }
            Some("execute_tool") => {
                let by = message["params"]["by"].as_i64().unwrap_or(1);
                self.count += by;
                self.save()?;
                let text = format!("Counter: {}", self.count);
                self.respond(
                    &id,
                    Ok(json!({"content": [{"type": "text", "text": text}], "details": {"count": self.count}})),
                )
            }
            Some("command") => {
                let args = message["args"].as_str().unwrap_or("").trim();
                let by = if args.is_empty() {
                    Ok(1)
                } else {
                    args.parse::<i64>()
                        .map_err(|_| format!("usage: /count [n] (got `{args}`)"))
                };
                match by {
                    Ok(by) => {
                        self.count += by;
                        self.save()?;
                        let text = format!("Counter: {}", self.count);
                        let _ = self.call("notify", json!({"message": text}))?;
                        self.respond(&id, Ok(Value::Null))
                    }
                    Err(error) => self.respond(&id, Err(error)),
                }
            }
            // `cancel` (nothing to cancel: the work is instant) and stray returns.
            _ => Ok(()),
        }
    }

    fn run(&mut self) -> Result<(), Stop> {
        let hello = self.read()?;
        if hello["type"] != "hello" {
            eprintln!("counter: expected hello");
            return Err(Stop::Closed);
        }
        self.send(&json!({
            "type": "register",
            "protocol": 1,
            "name": "counter",
            "events": ["session_start"],
            "tools": [{
                "name": "counter",
                "label": "Counter",
                "description": "Add to the session counter and return its new value.",
                "parameters": {
                    "type": "object",
                    "properties": {"by": {"type": "integer", "description": "How much to add (default 1)"}}
                }
            }],
            "commands": [{"name": "count", "description": "Add to the counter: /count [n]"}]
        }))?;
        loop {
            let message = self.read()?;
            self.dispatch(message)?;
        }
    }
}

fn main() {
    let mut counter = Counter {
        input: std::io::stdin().lock(),
        output: std::io::stdout().lock(),
        count: 0,
        next_call: 0,
    };
    match counter.run() {
        Ok(()) | Err(Stop::Closed) => {}
    }
}
