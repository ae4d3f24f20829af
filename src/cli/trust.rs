//! Project trust at startup (`session::trust` owns the rules and `trust.json`): which directory
//! the runtime will work in, the decision for it — asked on the terminal before the REPL starts
//! when nothing decides, as the reference's startup selector asks — and the notice about an
//! untrusted project.
//!
//! Invariant: the question is asked only when stdin is a terminal and the REPL will run; print,
//! JSON and RPC modes never wait for an answer.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::agent_args::AgentArgs;
use crate::cli::config::Env;
use crate::cli::settings::{Scope, Settings};
use crate::session::SessionTarget;
use crate::session::trust::{
    self, DefaultProjectTrust, ProjectTrust, ProjectTrustStore, TrustDecision,
};
use crate::store::SessionStore;
use crate::support::term;

/// The project trust of this process: `--approve`/`--no-approve`, the user's (never the
/// project's) `defaultProjectTrust`, `<agent dir>/trust.json`.
pub fn project_trust(
    args: &AgentArgs,
    env: &Env,
    settings: &Settings,
    interactive: bool,
) -> ProjectTrust {
    let global = settings.scope_object(Scope::Global);
    ProjectTrust::new(
        ProjectTrustStore::new(&env.agent_dir(), env.clock()),
        args.project_trust_override,
        DefaultProjectTrust::parse(global.get("defaultProjectTrust")),
        env.home().map(Path::to_path_buf),
        interactive,
    )
}

/// The directory the runtime will work in: a stored session's own directory while it exists
/// (the session then moves the runtime there), else the current one.
pub fn runtime_cwd(store: &SessionStore, target: &SessionTarget, cwd: &Path) -> Result<PathBuf> {
    if let SessionTarget::Open(id) = target {
        let stored = store.session(id)?.cwd;
        if !stored.is_empty() && Path::new(&stored).is_dir() {
            return Ok(PathBuf::from(stored));
        }
    }
    Ok(cwd.to_path_buf())
}

/// Decides for `runtime_cwd`, asking on the terminal when nothing else decides (the REPL
/// only); problems and the untrusted notice go to `warnings`. The decision is remembered for
/// the process, so the session's move to that directory does not ask again.
pub fn decide_at_startup(
    trust: &ProjectTrust,
    runtime_cwd: &Path,
    startup_cwd: &Path,
    warnings: &mut Vec<String>,
) -> bool {
    let trusted = match trust.decide(runtime_cwd, warnings) {
        TrustDecision::Decided(trusted) => trusted,
        TrustDecision::Ask => ask_on_terminal(trust, runtime_cwd, warnings),
    };
    // The session's load names an untrusted other directory itself.
    if !trusted
        && runtime_cwd == startup_cwd
        && trust::has_protected_resources(runtime_cwd, trust.home.as_deref())
    {
        warnings.push(if trust.interactive {
            trust::UNTRUSTED_REPL_NOTICE.to_owned()
        } else {
            trust::untrusted_notice(runtime_cwd)
        });
    }
    trusted
}

/// The reference's question with its answers numbered; anything but an answer's number (or
/// the end of input) trusts nothing and saves nothing.
fn ask_on_terminal(trust: &ProjectTrust, cwd: &Path, warnings: &mut Vec<String>) -> bool {
    let options = trust::trust_options(cwd, true);
    let mut stdout = std::io::stdout().lock();
    let mut text = String::new();
    for line in trust::trust_question(cwd).lines() {
        text.push_str(&term::line(line));
        text.push('\n');
    }
    text.push('\n');
    for (index, option) in options.iter().enumerate() {
        text.push_str(&format!("  {}. {}\n", index + 1, term::line(&option.label)));
    }
    text.push_str(&format!("Choose 1-{}: ", options.len()));
    if stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        trust.remember(cwd, false);
        return false;
    }
    drop(stdout);
    let mut answer = String::new();
    let read = std::io::stdin().lock().read_line(&mut answer);
    let chosen = read
        .ok()
        .and_then(|_| answer.trim().parse::<usize>().ok())
        .and_then(|number| number.checked_sub(1))
        .and_then(|index| options.get(index));
    match chosen {
        Some(option) => {
            if let Err(error) = trust.choose(cwd, option) {
                warnings.push(error.to_string());
            }
            option.trusted
        }
        None => {
            trust.remember(cwd, false);
            false
        }
    }
}
