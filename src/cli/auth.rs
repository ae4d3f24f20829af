//! `pi auth login|logout|status [provider]`: signing in from the command line (1.6.0's
//! `pi auth login <provider>` / `logout <provider>`; `status` is pi's), through
//! `modes::login` with a terminal that prompts on stderr and reads stdin (an API key with the
//! terminal's echo off).

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::ExitCode;

use anyhow::Result;

use crate::agent::tool::BoxFuture;
use crate::ai::oauth::callback::CallbackServer;
use crate::cli::UsageError;
use crate::cli::config::Env;
use crate::cli::keys;
use crate::modes::login::{self, LoginUi, Pasted};

const USAGE: &str = "usage: pi auth login [PROVIDER] [--api-key] [--no-browser] | pi auth logout PROVIDER | pi auth status [PROVIDER] | pi auth check|print-api-key|print-bearer-token --provider P | --model M";

/// Runs `pi auth …` (`args`: what follows the word `auth`).
pub fn run(args: &[String], env: Env) -> Result<ExitCode> {
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        print_help();
        return Ok(ExitCode::SUCCESS);
    }
    if args
        .first()
        .is_some_and(|word| crate::cli::auth_check::is_command(word))
    {
        return crate::cli::auth_check::run(args, env);
    }
    let (options, args) = login::login_options(args);
    let args = args.as_slice();
    if (options.api_key || options.no_browser) && args.first().map(String::as_str) != Some("login")
    {
        return Err(UsageError(format!(
            "--api-key and --no-browser are options of `pi auth login` ({USAGE})"
        ))
        .into());
    }
    let (command, provider) = match args {
        [command] => (command.as_str(), None),
        [command, provider] => (command.as_str(), Some(provider.as_str())),
        [] => return Err(UsageError(format!("`pi auth` needs a command ({USAGE})")).into()),
        _ => return Err(UsageError(format!("too many arguments ({USAGE})")).into()),
    };
    if matches!(command, "--help" | "-h" | "help") {
        print_help();
        return Ok(ExitCode::SUCCESS);
    }
    let credentials = keys::load_credentials(&env, env.clock());
    let registry = keys::load_model_registry(&env);
    match command {
        "status" => {
            for line in login::status(&credentials, provider) {
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
        "logout" => {
            let Some(provider) = provider else {
                return Err(
                    UsageError(format!("`pi auth logout` needs a provider ({USAGE})")).into(),
                );
            };
            println!("{}", login::logout(provider, &credentials)?);
            Ok(ExitCode::SUCCESS)
        }
        "login" => {
            let mut ui = TerminalUi;
            let provider = match provider {
                Some(provider) => provider.to_owned(),
                None => {
                    for (id, name) in login::oauth_providers() {
                        ui.say(&format!("  {id:<16} {name}"));
                    }
                    ui.say("  or any API-key provider (openai, google, openrouter, …)");
                    read_line("Provider: ", false)
                        .filter(|line| !line.trim().is_empty())
                        .map(|line| line.trim().to_owned())
                        .ok_or(login::LoginError::Cancelled)?
                }
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            let known = |id: &str| registry.all().iter().any(|model| model.provider == id);
            let done = runtime.block_on(login::login(
                &provider,
                &credentials,
                &mut ui,
                &known,
                options,
            ))?;
            println!("{done}");
            if provider == "radius" && !options.api_key {
                configure_radius_mcp(&env);
            }
            // A stdin reader may still wait for a paste that will not come.
            runtime.shutdown_background();
            Ok(ExitCode::SUCCESS)
        }
        other => Err(UsageError(format!(
            "unknown auth command \"{}\" ({USAGE})",
            crate::support::term::line(other)
        ))
        .into()),
    }
}

/// `pi auth --help` (also `pi help auth`).
pub fn print_help() {
    println!(
        "Sign in to model providers; the credentials are kept in <agent dir>/auth.json.\n\n{USAGE}\n\n  login [PROVIDER]    Sign in with an account (anthropic, openai-codex, github-copilot, kimi-coding,\n                      openrouter, xai, meta, radius) or save an API key\n                      --api-key: save an API key instead; --no-browser: the headless method\n                      (Anthropic's code page, Codex's and Radius's device code)\n  logout PROVIDER     Remove the stored credential\n  status [PROVIDER]   Show what is stored\n  check               Print ready, not_ready or invalid; exit with 0, 1 or 2\n                      --json: the result as JSON; --credentials: emit the credential when ready;\n                      --no-refresh: do not refresh an expired OAuth token\n  print-api-key       Print the resolved API key\n  print-bearer-token  Print a resolved OAuth bearer token (refreshed when it expires too soon)\n                      --min-expiry <duration>: the lifetime it must have left (default 30m; ms, s, m, h)\n\n  check and the print commands need --provider <provider> or --model <model>; the print commands\n  write the secret to stdout."
    );
}

/// Prompts on stderr and reads one line of stdin (`secret`: with the terminal's echo off).
fn read_line(question: &str, secret: bool) -> Option<String> {
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "{question}");
    let _ = stderr.flush();
    let stdin = std::io::stdin();
    let restore = if secret && stdin.is_terminal() {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        tcgetattr(&stdin).ok().inspect(|original| {
            let mut quiet = original.clone();
            quiet.local_flags.remove(LocalFlags::ECHO);
            let _ = tcsetattr(&stdin, SetArg::TCSANOW, &quiet);
        })
    } else {
        None
    };
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if let Some(original) = restore {
        let _ = nix::sys::termios::tcsetattr(&stdin, nix::sys::termios::SetArg::TCSANOW, &original);
        let _ = writeln!(stderr);
    }
    match read {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
    }
}

/// The terminal of `pi auth login`: lines to stderr, answers from stdin.
struct TerminalUi;

impl LoginUi for TerminalUi {
    fn say(&mut self, text: &str) {
        eprintln!("{}", crate::support::term::line(text));
    }

    fn ask<'a>(&'a mut self, question: &'a str, secret: bool) -> BoxFuture<'a, Option<String>> {
        let question = question.to_owned();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || read_line(&question, secret))
                .await
                .ok()
                .flatten()
        })
    }

    fn code_or_paste<'a>(
        &'a mut self,
        question: &'a str,
        callback: &'a mut CallbackServer,
    ) -> BoxFuture<'a, Pasted> {
        let question = question.to_owned();
        Box::pin(async move {
            let paste = tokio::task::spawn_blocking(move || read_line(&question, false));
            tokio::select! {
                biased;
                code = callback.wait() => Pasted::Callback(code),
                line = paste => match line.ok().flatten() {
                    Some(line) if !line.trim().is_empty() => Pasted::Input(line),
                    // An empty line: the browser may still come.
                    Some(_) => Pasted::Callback(callback.wait().await),
                    // Input ended: nobody is there to finish the sign-in, unless the browser
                    // just did.
                    None => callback.try_take().map_or(Pasted::Closed, Pasted::Callback),
                },
            }
        })
    }
}

/// After a Radius sign-in: points the Radius MCP server of the global `mcp.json` at the
/// login, adding it when missing, unless a global server already uses it (1.6.0's
/// `planRadiusMcpServer`; `pi auth login` does it without asking). The file's other content
/// is kept.
fn configure_radius_mcp(env: &Env) {
    use serde_json::{Map, Value, json};

    use crate::session::mcp::config::{self, Transport};
    let agent_dir = env.agent_dir();
    let url = format!("{}/mcp", crate::ai::oauth::device::RADIUS_DEFAULT_GATEWAY);
    let normalize = |text: &str| text.trim_end_matches('/').to_owned();
    let loaded = config::load(&agent_dir, env.cwd(), false);
    let existing = loaded.servers.iter().find(|server| {
        matches!(&server.transport, Transport::Http { url: found, .. } if normalize(found) == normalize(&url))
    });
    let uses_login = |server: &config::ServerEntry| {
        server.raw.get("auth").and_then(|auth| auth.get("provider")) == Some(&json!("radius"))
    };
    if existing.is_some_and(uses_login) {
        return;
    }
    let name = match existing {
        Some(server) => server.name.clone(),
        None => {
            let taken: std::collections::HashSet<String> = loaded
                .servers
                .iter()
                .map(|server| config::namespace(&server.name))
                .collect();
            let mut name = "radius".to_owned();
            let mut suffix = 1;
            while taken.contains(&config::namespace(&name)) {
                name = if suffix == 1 {
                    "radius-mcp".to_owned()
                } else {
                    format!("radius-mcp-{suffix}")
                };
                suffix += 1;
            }
            name
        }
    };
    let mut entry: Map<String, Value> = match existing {
        Some(server) => server.raw.clone(),
        None => {
            let mut entry = Map::new();
            entry.insert("url".into(), json!(url));
            entry
        }
    };
    // `auth` replaces the MCP OAuth sign-in.
    entry.insert("auth".into(), json!({ "provider": "radius" }));
    entry.remove("oauth");
    let path = config::global_path(&agent_dir);
    match config::add_server(&path, &name, entry) {
        Ok(replaced) => println!(
            "{} MCP server \"{name}\" in {} to use the Radius login.",
            if replaced { "Updated" } else { "Added" },
            path.display()
        ),
        Err(error) => eprintln!(
            "Could not update {}: {}",
            path.display(),
            crate::support::term::line(&error.to_string())
        ),
    }
}
