//! A real `AgentSession` in a temporary workspace, talking to a scripted provider on
//! 127.0.0.1 (OpenAI-compatible), with a real database, real tools and a fixed clock.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi::ai::auth::{AuthFile, Credentials};
use pi::ai::{AiClient, ModelRegistry, TransportConfig};
use pi::cli::config::Env;
use pi::cli::keys::ShellKeyResolver;
use pi::session::extensions::ExtensionsConfig;
use pi::session::resources::{HarnessDocs, ResourceConfig, Resources};
use pi::session::settings::NoSettingsSink;
use pi::session::tools::read::ReadConfig;
use pi::session::tools::shell::ShellConfig;
use pi::session::tools::workspace::Workspace;
use pi::session::tools::{ToolSelection, ToolSet, ToolsConfig, builtin_tools};
use pi::session::{
    AgentSession, ModelCandidates, ModelChoice, SessionConfig, SessionSettings, SessionTarget,
};
use pi::store::SessionStore;
use pi::support::clock::{Clock, SteppingClock};
use pi::support::ids::IdSource;

use crate::common::provider::{MockResponse, ProviderServer};
use crate::common::{TEST_CLOCK_START_MS, TestEnv, open_store};

/// The `models.json` of the scripted provider (`mock/mock-model`, OpenAI-compatible).
pub fn models_json(base_url: &str, context_window: u64) -> String {
    format!(
        r#"{{"providers":{{"mock":{{"baseUrl":"{base_url}/v1","api":"openai-completions","apiKey":"test-key","models":[{{"id":"mock-model","name":"Mock","reasoning":false,"input":["text","image"],"contextWindow":{context_window},"maxTokens":4096,"cost":{{"input":1,"output":2,"cacheRead":0.5,"cacheWrite":0}}}}]}}}}}}"#
    )
}

/// A workspace, a database and a scripted provider.
pub struct Harness {
    pub env: TestEnv,
    pub server: ProviderServer,
    pub store: SessionStore,
    pub settings: SessionSettings,
    /// The extensions sessions load (none by default).
    pub extensions: ExtensionsConfig,
    /// The mock model's context window (128000 unless a test shrinks it).
    pub context_window: u64,
}

/// Settings with short delays (retries and transport backoff) for tests.
pub fn fast_settings() -> SessionSettings {
    let mut settings = SessionSettings::default();
    settings.retry.base_delay_ms = 10;
    settings.transport = TransportConfig {
        initial_retry_delay: Duration::from_millis(10),
        ..TransportConfig::default()
    };
    settings
}

impl Harness {
    pub fn new(responses: Vec<MockResponse>) -> Self {
        let env = TestEnv::new();
        let store = open_store(&env.db(), 21);
        Self {
            server: ProviderServer::start(responses),
            env,
            store,
            settings: fast_settings(),
            extensions: ExtensionsConfig::default(),
            context_window: 128_000,
        }
    }

    pub fn config(&self) -> SessionConfig {
        let env = Env::from_parts(
            Default::default(),
            self.env.workspace.clone(),
            Some(self.env.home.clone()),
        );
        let clock: Arc<dyn Clock> = Arc::new(SteppingClock::new(TEST_CLOCK_START_MS, 1000));
        let ids = Arc::new(IdSource::seeded(5));
        let registry = Arc::new(ModelRegistry::load(
            Some(&models_json(&self.server.url(), self.context_window)),
            "models.json",
        ));
        let credentials = Arc::new(Credentials::new(
            AuthFile::parse(None),
            Arc::new(ShellKeyResolver::new(&env)),
            clock.clone(),
        ));
        let shell = ShellConfig {
            shell_path: None,
            command_prefix: None,
            env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
            bin_dir: None,
            temp_dir: self.env.dir.path().to_path_buf(),
            ids: ids.clone(),
        };
        let tools_config = ToolsConfig {
            workspace: Workspace::new(Some(self.env.home.clone())),
            read: ReadConfig {
                auto_resize_images: true,
            },
            shell: shell.clone(),
        };
        let tools = ToolSet::new(
            builtin_tools(&tools_config),
            Vec::new(),
            &ToolSelection::from_flags(None, false, false),
        );
        let resources = Resources::load(ResourceConfig::new(
            &self.env.workspace,
            &self.env.agent_dir,
            Some(&self.env.home),
        ));
        let model = registry
            .find("mock", "mock-model")
            .cloned()
            .expect("mock model");
        SessionConfig {
            store: self.store.clone(),
            client: AiClient::new(clock.clone(), ids.clone()).expect("client"),
            registry,
            credentials,
            resources: Arc::new(Mutex::new(resources)),
            tools,
            tools_from_transcript: false,
            tool_modifiers: Vec::new(),
            startup_name: None,
            shell,
            cwd: self.env.workspace.clone(),
            settings: self.settings.clone(),
            settings_sink: Arc::new(NoSettingsSink),
            settings_reload: None,
            clock,
            ids,
            models: ModelCandidates {
                explicit: None,
                scoped: None,
                fallback: Some(model.clone()),
                explicit_thinking: None,
                scope: vec![ModelChoice {
                    model,
                    thinking: None,
                }],
            },
            local_date: chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("date"),
            harness_docs: HarnessDocs::in_dir(&self.env.dir.path().join("docs")),
            emit_partials: false,
            extensions: self.extensions.clone(),
            trust: None,
        }
    }

    pub async fn open(&self, target: SessionTarget) -> AgentSession {
        AgentSession::open(self.config(), target)
            .await
            .expect("open session")
            .0
    }
}
