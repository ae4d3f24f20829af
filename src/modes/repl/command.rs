//! What a line typed in the REPL means: a built-in slash command (matched first, exactly or
//! followed by a space and arguments, as the reference's editor does), a `!cmd` / `!!cmd`
//! shell command, or a prompt (which may still be a `/template` or `/skill:name` — the session
//! expands those).
//!
//! Invariant: pure; the REPL carries the commands out.

/// A built-in command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `/tree [filter]`: draw the tree and move the leaf.
    Tree(Option<String>),
    /// `/label ENTRY [TEXT]`: set (or clear) an entry's label.
    Label(Option<String>),
    /// `/name [NAME]`: show or set the session name.
    Name(Option<String>),
    /// `/session`: session information.
    Session,
    /// `/new`: a new session.
    New,
    /// `/resume [WORDS]`: pick another session (searching with the words).
    Resume(Option<String>),
    /// `/fork`: a new session from before an earlier user message.
    Fork,
    /// `/clone`: a new session with the active branch.
    Clone,
    /// `/takeover`: take over the writer lease of a session open read-only here.
    TakeOver,
    /// `/compact [FOCUS]`: summarise the context.
    Compact(Option<String>),
    /// `/model [SEARCH]`: pick a model.
    Model(Option<String>),
    /// `/thinking [LEVEL]`: show or set the thinking level.
    Thinking(Option<String>),
    /// `/scoped-models [N…|all|none|save]`: the models Ctrl+P cycles through.
    ScopedModels(Option<String>),
    /// `/settings [NAME VALUE]`: the settings this REPL has, shown or set (and saved).
    Settings(Option<String>),
    /// `/export [FILE]`: `FILE.jsonl` is the active branch as a new JSONL file; any other name,
    /// or none, the session's HTML page.
    Export(Option<String>),
    /// `/share`: the session's HTML page as a secret gist (through the `gh` CLI).
    Share,
    /// `/copy`: the last answer to the clipboard.
    Copy,
    /// `/hotkeys`: the keys the REPL knows.
    Hotkeys,
    /// `/changelog`: pi's changelog.
    Changelog,
    /// `/login [PROVIDER]`: sign in with an account (OAuth).
    Login(Option<String>),
    /// `/logout [PROVIDER]`: remove a stored credential.
    Logout(Option<String>),
    /// `/expand`: the whole output of the last `!` command.
    Expand,
    /// `/import FILE.jsonl`: import a JSONL session and switch to it.
    Import(Option<String>),
    /// `/reload`: reload skills, prompt templates and context files.
    Reload,
    /// `/trust`: save a project trust decision for this folder (used from the next start).
    Trust,
    /// `/mcp [reconnect|enable|disable SERVER]`: MCP server status and actions.
    Mcp(Option<String>),
    /// `/help`: the commands.
    Help,
    /// `/quit` (also `/exit`): leave.
    Quit,
}

/// One submitted line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Nothing but white space.
    Empty,
    /// A built-in command.
    Command(Command),
    /// `!cmd` (in the context) or `!!cmd` (excluded from it).
    Shell {
        /// The command line.
        command: String,
        /// `!!`: the output stays out of the model's context.
        exclude_from_context: bool,
    },
    /// Anything else: sent to the model.
    Prompt(String),
}

/// The built-in commands with a one-line description, for `/help` and completion.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "tree",
        "Draw the session tree and go to an earlier point, optionally summarising the branch left (filters: all, user, labeled, no-tools)",
    ),
    (
        "label",
        "Label an entry: /label ENTRY [TEXT] (no text clears)",
    ),
    ("name", "Show or set the session name"),
    ("session", "Session id, database, message and token counts"),
    ("new", "Start a new session"),
    (
        "resume",
        "Resume another session (optionally searching: /resume WORDS)",
    ),
    (
        "fork",
        "Start a new session from before an earlier user message",
    ),
    ("clone", "Start a new session with the active branch"),
    (
        "takeover",
        "Take over a session open read-only here (another pi was writing it)",
    ),
    ("compact", "Summarise the context (optional focus text)"),
    (
        "model",
        "Choose the model (optionally filtered: /model SEARCH)",
    ),
    ("thinking", "Show or set the thinking level"),
    (
        "scoped-models",
        "The models Ctrl+P cycles through: /scoped-models [N…|all|none|save]",
    ),
    (
        "settings",
        "Show the settings, or set one: /settings NAME VALUE (saved to settings.json)",
    ),
    (
        "export",
        "Write the session's HTML page (/export [FILE.html]), or the active branch as a JSONL file (/export FILE.jsonl)",
    ),
    (
        "share",
        "Publish the session's HTML page as a secret GitHub gist (needs the gh CLI)",
    ),
    ("copy", "Copy the last answer to the clipboard"),
    (
        "mcp",
        "MCP servers: status; reconnect, enable or disable SERVER",
    ),
    ("hotkeys", "Show the keys the REPL knows"),
    ("changelog", "Show the changelog of pi"),
    (
        "login",
        "Sign in with an account: /login [anthropic|openai-codex|github-copilot]",
    ),
    ("logout", "Remove a stored credential: /logout [PROVIDER]"),
    (
        "expand",
        "Show the whole output of the last !command (long output is folded)",
    ),
    ("import", "Import a JSONL session file and switch to it"),
    (
        "reload",
        "Reload skills, prompt templates and context files",
    ),
    (
        "trust",
        "Save a project trust decision for this folder (takes effect at the next start)",
    ),
    ("help", "Show this help"),
    ("quit", "Exit pi"),
];

/// Returns the argument text after `/name` when `text` is `/name` or `/name …`
/// (`Some(None)` for the bare command, `None` when it is another command).
fn argument<'a>(text: &'a str, name: &str) -> Option<Option<&'a str>> {
    let rest = text.strip_prefix('/')?.strip_prefix(name)?;
    if rest.is_empty() {
        return Some(None);
    }
    let args = rest.strip_prefix(|ch: char| ch.is_whitespace())?.trim();
    Some((!args.is_empty()).then_some(args))
}

/// Returns the first argument as the reference's `getPathCommandArgument` reads it: quoted
/// with `"` or `'` (up to the closing quote; unterminated gives nothing), else up to the
/// first white space.
pub fn path_argument(args: Option<&str>) -> Option<String> {
    let args = args?.trim_start();
    let first = args.chars().next()?;
    if first == '"' || first == '\'' {
        let rest = &args[1..];
        let end = rest.find(first)?;
        return Some(rest[..end].to_owned());
    }
    let end = args.find(char::is_whitespace).unwrap_or(args.len());
    Some(args[..end].to_owned())
}

/// The command name a prompt starting with `/` would be (`/word`, `/word args`), when the
/// word could name a command: letters, digits, `-`, `_`, `:` and `.`, no `/` inside (so
/// `/usr/bin/env fails` is a prompt about a path).
pub fn slash_word(prompt: &str) -> Option<&str> {
    let rest = prompt.strip_prefix('/')?;
    let word = rest.split(char::is_whitespace).next().unwrap_or("");
    let valid = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'));
    valid.then_some(word)
}

/// The known name closest to `word` (Levenshtein distance at most a third of its length, at
/// least 1; a name that starts with the word counts as close).
pub fn closest<'a>(word: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for name in names {
        let distance = if name.starts_with(word) {
            0
        } else {
            levenshtein(word, name)
        };
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, name));
        }
    }
    best.map(|(_, name)| name)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(current)
            };
            previous = current;
        }
    }
    row[b.len()]
}

/// Parses a submitted line.
pub fn parse(line: &str) -> Input {
    let text = line.trim();
    if text.is_empty() {
        return Input::Empty;
    }
    if let Some(rest) = text.strip_prefix('!') {
        let (command, exclude_from_context) = match rest.strip_prefix('!') {
            Some(command) => (command.trim(), true),
            None => (rest.trim(), false),
        };
        if !command.is_empty() {
            return Input::Shell {
                command: command.to_owned(),
                exclude_from_context,
            };
        }
    }
    let owned = |args: Option<&str>| args.map(str::to_owned);
    let exact = |name: &str| text == format!("/{name}");
    let command = if let Some(args) = argument(text, "tree") {
        Command::Tree(owned(args))
    } else if let Some(args) = argument(text, "label") {
        Command::Label(owned(args))
    } else if let Some(args) = argument(text, "name") {
        Command::Name(owned(args))
    } else if exact("session") {
        Command::Session
    } else if exact("new") {
        Command::New
    } else if let Some(args) = argument(text, "resume") {
        Command::Resume(owned(args))
    } else if exact("fork") {
        Command::Fork
    } else if exact("clone") {
        Command::Clone
    } else if exact("takeover") {
        Command::TakeOver
    } else if let Some(args) = argument(text, "compact") {
        Command::Compact(owned(args))
    } else if let Some(args) = argument(text, "model") {
        Command::Model(owned(args))
    } else if let Some(args) = argument(text, "thinking") {
        Command::Thinking(owned(args))
    } else if let Some(args) = argument(text, "scoped-models") {
        Command::ScopedModels(owned(args))
    } else if let Some(args) = argument(text, "settings") {
        Command::Settings(owned(args))
    } else if let Some(args) = argument(text, "export") {
        Command::Export(path_argument(args))
    } else if let Some(args) = argument(text, "import") {
        Command::Import(path_argument(args))
    } else if exact("share") {
        Command::Share
    } else if exact("copy") {
        Command::Copy
    } else if exact("hotkeys") {
        Command::Hotkeys
    } else if exact("changelog") {
        Command::Changelog
    } else if let Some(args) = argument(text, "login") {
        Command::Login(owned(args))
    } else if let Some(args) = argument(text, "logout") {
        Command::Logout(owned(args))
    } else if exact("expand") {
        Command::Expand
    } else if exact("reload") {
        Command::Reload
    } else if exact("trust") {
        Command::Trust
    } else if let Some(args) = argument(text, "mcp") {
        Command::Mcp(owned(args))
    } else if exact("help") {
        Command::Help
    } else if exact("quit") || exact("exit") {
        Command::Quit
    } else {
        return Input::Prompt(line.trim().to_owned());
    };
    Input::Command(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_words_name_commands_and_paths_stay_prompts() {
        assert_eq!(slash_word("/exprt out.html"), Some("exprt"));
        assert_eq!(slash_word("/skill:review now"), Some("skill:review"));
        assert_eq!(slash_word("/usr/bin/env is missing"), None);
        assert_eq!(slash_word("/"), None);
        assert_eq!(slash_word("hello /x"), None);
    }

    #[test]
    fn the_closest_command_is_offered_for_a_typo() {
        let names = ["export", "import", "exit", "hotkeys", "help"];
        assert_eq!(closest("exprt", names), Some("export"));
        assert_eq!(closest("hotkey", names), Some("hotkeys"));
        assert_eq!(closest("hel", names), Some("help"));
        assert_eq!(closest("zzzzzz", names), None);
    }

    #[test]
    fn built_in_commands_match_exactly_or_with_arguments() {
        assert_eq!(parse("/tree"), Input::Command(Command::Tree(None)));
        assert_eq!(
            parse("/tree  all "),
            Input::Command(Command::Tree(Some("all".into())))
        );
        assert_eq!(
            parse("/name  My session "),
            Input::Command(Command::Name(Some("My session".into())))
        );
        assert_eq!(parse("/name"), Input::Command(Command::Name(None)));
        assert_eq!(parse("/session"), Input::Command(Command::Session));
        assert_eq!(parse("/quit"), Input::Command(Command::Quit));
        assert_eq!(parse("/trust"), Input::Command(Command::Trust));
        assert_eq!(parse("/takeover"), Input::Command(Command::TakeOver));
        assert_eq!(
            parse("/compact keep the API notes"),
            Input::Command(Command::Compact(Some("keep the API notes".into())))
        );
        // Not a command: a longer word, or arguments where none are taken.
        assert_eq!(parse("/treehouse"), Input::Prompt("/treehouse".into()));
        assert_eq!(parse("/session x"), Input::Prompt("/session x".into()));
        assert_eq!(
            parse("/review src/main.rs"),
            Input::Prompt("/review src/main.rs".into())
        );
    }

    #[test]
    fn shell_commands_and_prompts() {
        assert_eq!(
            parse("!ls -la"),
            Input::Shell {
                command: "ls -la".into(),
                exclude_from_context: false
            }
        );
        assert_eq!(
            parse("!! git status"),
            Input::Shell {
                command: "git status".into(),
                exclude_from_context: true
            }
        );
        assert_eq!(parse("!"), Input::Prompt("!".into()));
        assert_eq!(parse("   "), Input::Empty);
        assert_eq!(
            parse("hello\nworld  "),
            Input::Prompt("hello\nworld".into())
        );
    }

    #[test]
    fn path_arguments_take_the_first_word_or_a_quoted_one() {
        assert_eq!(
            parse("/export out.jsonl extra"),
            Input::Command(Command::Export(Some("out.jsonl".into())))
        );
        assert_eq!(
            parse("/import \"my file.jsonl\""),
            Input::Command(Command::Import(Some("my file.jsonl".into())))
        );
        assert_eq!(
            parse("/import 'open"),
            Input::Command(Command::Import(None))
        );
        assert_eq!(parse("/export"), Input::Command(Command::Export(None)));
    }
}
