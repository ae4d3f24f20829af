//! The runtime directory: where tools, `!cmd` and extensions run. It starts as the startup
//! directory and follows the stored cwd of every session loaded afterwards (while it exists);
//! moving there ([`AgentSession::relocate`]) asks for project trust, reloads the resources,
//! that project's settings and its executable extensions.
//!
//! Invariant: a project's protected resources (its settings, skills, templates, extensions)
//! load only when it is trusted; the writer lease keeps the startup settings.

use std::path::PathBuf;

use crate::session::agent_session::config::OpenReport;
use crate::session::agent_session::state::{AgentSession, lock};
use crate::session::extensions::ExtensionsConfig;
use crate::session::settings::SessionSettings;
use crate::session::trust::{self, ProjectTrust, TrustDecision};

impl AgentSession {
    /// Reads the settings of the runtime's directory.
    pub(crate) fn with_settings<T>(&self, read: impl FnOnce(&SessionSettings) -> T) -> T {
        read(&lock(&self.inner.settings))
    }

    /// Returns the working directory of the current session runtime: the startup directory,
    /// or the stored cwd of the session loaded since (tools, `!cmd`, resources and extensions
    /// work there).
    pub fn cwd(&self) -> PathBuf {
        lock(&self.inner.cwd).clone()
    }

    /// Decides whether `cwd`'s protected resources may load (`session::trust`): without a
    /// decision and with a person to answer (the REPL), asks through the extension UI; what
    /// could not be read or saved, and an untrusted project's notice, go to `report`.
    pub(super) async fn project_trusted(
        &self,
        cwd: &std::path::Path,
        report: &mut OpenReport,
    ) -> bool {
        let Some(trust) = self.config().trust.clone() else {
            return true;
        };
        let trusted = match trust.decide(cwd, &mut report.notices) {
            TrustDecision::Decided(trusted) => trusted,
            TrustDecision::Ask => {
                let options = trust::trust_options(cwd, true);
                let labels: Vec<String> = options.iter().map(|o| o.label.clone()).collect();
                let ui = self.config().extensions.ui.clone();
                let chosen = ui
                    .select(&trust::trust_question(cwd), &labels, None)
                    .await
                    .and_then(|label| options.iter().find(|o| o.label == label));
                match chosen {
                    Some(option) => {
                        if let Err(error) = trust.choose(cwd, option) {
                            report.notices.push(error.to_string());
                        }
                        option.trusted
                    }
                    None => {
                        trust.remember(cwd, false);
                        false
                    }
                }
            }
        };
        if !trusted && trust::has_protected_resources(cwd, trust.home.as_deref()) {
            report.notices.push(if trust.interactive {
                trust::UNTRUSTED_REPL_NOTICE.to_owned()
            } else {
                trust::untrusted_notice(cwd)
            });
        }
        trusted
    }

    /// Returns the project trust of this process (`None`: every project is trusted).
    pub fn project_trust(&self) -> Option<&ProjectTrust> {
        self.config().trust.as_ref()
    }

    /// Returns whether the current runtime directory's protected resources were loaded
    /// (`true` without project trust configured).
    pub fn project_is_trusted(&self) -> bool {
        match &self.config().trust {
            Some(trust) => trust.decided_for(&self.cwd()).unwrap_or(false),
            None => true,
        }
    }

    /// Moves the runtime to `cwd`: the resources (context files, and for a trusted project
    /// its skills, templates and prompt files) are loaded again for it, and the next
    /// extensions are that project's (trusted only) and start there. Returns notices
    /// (extensions that cannot be used, reference extensions skipped).
    pub(super) fn relocate(&self, cwd: &std::path::Path, project_trusted: bool) -> Vec<String> {
        {
            let mut current = lock(&self.inner.cwd);
            if current.as_path() == cwd {
                return Vec::new();
            }
            *current = cwd.to_path_buf();
        }
        let project_settings = if project_trusted {
            crate::session::settings::read_project_settings(cwd)
        } else {
            serde_json::Value::Null
        };
        lock(&self.config().resources).relocate(cwd, &project_settings, project_trusted);
        if let Some(reload) = &self.config().settings_reload {
            // As the reference builds a new runtime from that directory's settings: retry,
            // compaction, queue modes, provider transport and the rest follow the project; the
            // writer lease keeps the startup intervals (it belongs to the store).
            let mut settings = reload(cwd, project_trusted);
            settings.lease = self.with_settings(|current| current.lease.clone());
            {
                let mut state = self.state();
                state.auto_retry = settings.retry.enabled;
                state.auto_compaction = settings.compaction.enabled;
                state.steering_mode = settings.steering_mode;
                state.follow_up_mode = settings.follow_up_mode;
            }
            *lock(&self.inner.settings) = settings;
        }
        let Some(rediscovery) = &self.config().extensions.rediscovery else {
            return Vec::new();
        };
        let found = rediscovery.discover(cwd, &project_settings, project_trusted);
        let notices = found.problems.clone();
        *lock(&self.inner.executables) = Some(found.executables);
        notices
    }

    /// The extensions configuration of the current runtime (its directory's executables).
    pub(crate) fn extensions_config(&self) -> ExtensionsConfig {
        let mut config = self.config().extensions.clone();
        if let Some(executables) = lock(&self.inner.executables).clone() {
            config.executables = executables;
        }
        config
    }
}
