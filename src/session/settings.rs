//! The settings a session runs with, as values (`cli` reads `settings.json` and fills them),
//! and the sink through which the session writes back what the reference persists (default
//! model and thinking level, toggles).

use std::path::PathBuf;

use crate::ai::{CacheRetention, ThinkingBudgets, ThinkingLevel, TransportConfig};
use crate::store::LeaseConfig;

/// Session-level retry of a failed turn (`retry.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetrySettings {
    /// `retry.enabled` (default true).
    pub enabled: bool,
    /// `retry.maxRetries` (default 3).
    pub max_retries: u32,
    /// `retry.baseDelayMs` (default 2000): attempt n waits `base · 2^(n−1)`...
    pub base_delay_ms: u64,
    /// ...but never longer than `retry.maxAgentDelayMs` (default 60000; 1.6.0's
    /// `retryDelayMs`).
    pub max_agent_delay_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2000,
            max_agent_delay_ms: 60_000,
        }
    }
}

impl RetrySettings {
    /// The wait before retry `attempt` (1-based): `base · 2^(attempt−1)`, at most
    /// `max_agent_delay_ms` (1.6.0's `retryDelayMs`).
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        self.base_delay_ms
            .saturating_mul(1u64 << attempt.saturating_sub(1).min(62))
            .min(self.max_agent_delay_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::RetrySettings;

    #[test]
    fn the_retry_delay_doubles_up_to_the_cap() {
        let settings = RetrySettings::default();
        let waits: Vec<u64> = (1..=7).map(|n| settings.delay_ms(n)).collect();
        assert_eq!(waits, [2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000]);
        let no_wait = RetrySettings {
            max_agent_delay_ms: 0,
            ..settings
        };
        assert_eq!(no_wait.delay_ms(1), 0);
        let huge = RetrySettings {
            base_delay_ms: u64::MAX,
            ..settings
        };
        assert_eq!(huge.delay_ms(40), 60_000);
    }
}

/// How queued messages are delivered (`steeringMode`, `followUpMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueMode {
    /// One message per turn (the default).
    #[default]
    OneAtATime,
    /// Every queued message at once.
    All,
}

impl QueueMode {
    /// Parses `one-at-a-time` / `all`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "one-at-a-time" => Some(Self::OneAtATime),
            "all" => Some(Self::All),
            _ => None,
        }
    }

    /// Returns the setting's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OneAtATime => "one-at-a-time",
            Self::All => "all",
        }
    }
}

/// Automatic compaction (`compaction.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionToggles {
    /// `compaction.enabled` (default true).
    pub enabled: bool,
    /// `compaction.reserveTokens` (default 16384).
    pub reserve_tokens: u64,
    /// `compaction.keepRecentTokens` (default 20000).
    pub keep_recent_tokens: u64,
}

impl Default for CompactionToggles {
    fn default() -> Self {
        Self {
            enabled: true,
            reserve_tokens: 16384,
            keep_recent_tokens: 20000,
        }
    }
}

/// Everything from `settings.json` a session needs.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSettings {
    /// Turn-level retry.
    pub retry: RetrySettings,
    /// HTTP-level behaviour (`retry.provider.*`).
    pub transport: TransportConfig,
    /// `thinkingBudgets`.
    pub thinking_budgets: ThinkingBudgets,
    /// Prompt-cache retention.
    pub cache_retention: CacheRetention,
    /// `images.blockImages`.
    pub block_images: bool,
    /// `defaultThinkingLevel`.
    pub default_thinking: Option<ThinkingLevel>,
    /// `steeringMode`.
    pub steering_mode: QueueMode,
    /// `followUpMode`.
    pub follow_up_mode: QueueMode,
    /// `compaction.*`.
    pub compaction: CompactionToggles,
    /// `branchSummary.reserveTokens` (default 16384).
    pub branch_summary_reserve_tokens: u64,
    /// Whether attribution headers are sent (`enableInstallTelemetry`, `PI_TELEMETRY`).
    pub telemetry: bool,
    /// The writer lease (`lease.heartbeatMs`, `lease.staleMs`; the owner the mode names).
    pub lease: LeaseSettings,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            retry: RetrySettings::default(),
            transport: TransportConfig::default(),
            thinking_budgets: ThinkingBudgets::default(),
            cache_retention: CacheRetention::Short,
            block_images: false,
            default_thinking: None,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            compaction: CompactionToggles::default(),
            branch_summary_reserve_tokens: 16384,
            telemetry: true,
            lease: LeaseSettings::default(),
        }
    }
}

/// Where the session writes settings the reference persists (the global `settings.json`).
pub trait SettingsSink: Send + Sync + std::fmt::Debug {
    /// `defaultProvider` + `defaultModel`.
    fn set_default_model(&self, provider: &str, model_id: &str);
    /// `defaultThinkingLevel`.
    fn set_default_thinking_level(&self, level: ThinkingLevel);
    /// `compaction.enabled`.
    fn set_auto_compaction(&self, enabled: bool);
    /// `retry.enabled`.
    fn set_auto_retry(&self, enabled: bool);
    /// `steeringMode`.
    fn set_steering_mode(&self, mode: QueueMode);
    /// `followUpMode`.
    fn set_follow_up_mode(&self, mode: QueueMode);
    /// `enabledModels` (what `/scoped-models save` keeps).
    fn set_enabled_models(&self, patterns: &[String]) -> Result<(), SaveError> {
        let _ = patterns;
        Err(SaveError::NotSaved)
    }
    /// A top-level key of the global settings, written as given (`/settings`).
    fn set_value(&self, key: &str, value: serde_json::Value) -> Result<(), SaveError> {
        let _ = (key, value);
        Err(SaveError::NotSaved)
    }
}

/// Why a setting was not saved.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// This run keeps no settings file.
    #[error("settings are not saved in this run")]
    NotSaved,
    /// The file could not be written.
    #[error("{0}")]
    Write(String),
}

/// A sink that writes nothing (tests, `--no-session` style runs that must not touch files).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSettingsSink;

/// Builds the session settings of a working directory (global `settings.json` overlaid by
/// that directory's `.pi/settings.json` when the second argument says the project is trusted);
/// `cli` provides it, since it owns the file format.
pub type SettingsReload =
    std::sync::Arc<dyn Fn(&std::path::Path, bool) -> SessionSettings + Send + Sync>;

impl SettingsSink for NoSettingsSink {
    fn set_default_model(&self, _provider: &str, _model_id: &str) {}
    fn set_default_thinking_level(&self, _level: ThinkingLevel) {}
    fn set_auto_compaction(&self, _enabled: bool) {}
    fn set_auto_retry(&self, _enabled: bool) {}
    fn set_steering_mode(&self, _mode: QueueMode) {}
    fn set_follow_up_mode(&self, _mode: QueueMode) {}
}

/// Reads `<cwd>/.pi/settings.json` for a runtime moved to `cwd` (`Null` when the file is
/// missing or not JSON; at startup `cli/settings.rs` loads it and reports such files).
pub fn read_project_settings(cwd: &std::path::Path) -> serde_json::Value {
    std::fs::read(cwd.join(".pi").join("settings.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// The lease settings of a session (`settings.json` `lease.*`; see docs/RELIABILITY.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSettings {
    /// Heartbeat and staleness.
    pub config: LeaseConfig,
    /// What the lease row names as its owner, such as `pi (interactive)`.
    pub owner: String,
    /// Where entries that could still not be written when their session is left are saved,
    /// as a JSONL file of the session that `pi import` merges back (`<agent dir>/unsaved`);
    /// `None` drops them with an error notice.
    pub rescue_dir: Option<PathBuf>,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        Self {
            config: LeaseConfig::default(),
            owner: "pi".to_owned(),
            rescue_dir: None,
        }
    }
}
