//! Choosing a model from what the user typed: `--provider/--model` with a `:thinking` suffix,
//! scope patterns (`--models`, `enabledModels`), and the per-provider defaults
//! (`spec/models-providers-settings.md` §6.1–§6.5; the reference's `model-resolver.js`).
//!
//! Invariant: pure functions over a model list; warnings are returned as text for the caller
//! to print, never printed here.

use std::cmp::Ordering;

use globset::GlobBuilder;

use crate::ai::models::{Model, ModelRegistry, ThinkingLevel};

/// The reference's default model per provider, in its key order (used when picking a
/// fallback model: the first available model that is some provider's default wins).
pub const DEFAULT_MODEL_PER_PROVIDER: &[(&str, &str)] = &[
    ("amazon-bedrock", "us.anthropic.claude-opus-4-6-v1"),
    ("anthropic", "claude-opus-4-7"),
    ("openai", "gpt-5.4"),
    ("azure-openai-responses", "gpt-5.4"),
    ("openai-codex", "gpt-5.5"),
    ("deepseek", "deepseek-v4-pro"),
    ("google", "gemini-3.1-pro-preview"),
    ("google-vertex", "gemini-3.1-pro-preview"),
    ("github-copilot", "gpt-5.4"),
    ("openrouter", "moonshotai/kimi-k2.6"),
    ("vercel-ai-gateway", "zai/glm-5.1"),
    ("xai", "grok-4.20-0309-reasoning"),
    ("groq", "openai/gpt-oss-120b"),
    ("cerebras", "zai-glm-4.7"),
    ("zai", "glm-5.1"),
    ("mistral", "devstral-medium-latest"),
    ("minimax", "MiniMax-M2.7"),
    ("minimax-cn", "MiniMax-M2.7"),
    ("moonshotai", "kimi-k2.6"),
    ("moonshotai-cn", "kimi-k2.6"),
    ("huggingface", "moonshotai/Kimi-K2.6"),
    ("fireworks", "accounts/fireworks/models/kimi-k2p6"),
    ("opencode", "kimi-k2.6"),
    ("opencode-go", "kimi-k2.6"),
    ("kimi-coding", "kimi-for-coding"),
    ("cloudflare-workers-ai", "@cf/moonshotai/kimi-k2.6"),
    (
        "cloudflare-ai-gateway",
        "workers-ai/@cf/moonshotai/kimi-k2.6",
    ),
    ("xiaomi", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-cn", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-ams", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-sgp", "mimo-v2.5-pro"),
];

/// Returns the reference's default model id for a provider.
pub fn default_model_for(provider: &str) -> Option<&'static str> {
    DEFAULT_MODEL_PER_PROVIDER
        .iter()
        .find(|(name, _)| *name == provider)
        .map(|(_, id)| *id)
}

/// Returns the first model of `available` that is a provider default, scanning the defaults
/// in their order, else the first available model (§6.6 steps 5–6).
pub fn pick_default_model<'a>(available: &[&'a Model]) -> Option<&'a Model> {
    DEFAULT_MODEL_PER_PROVIDER
        .iter()
        .find_map(|(provider, id)| {
            available
                .iter()
                .find(|model| model.provider == *provider && model.id == *id)
                .copied()
        })
        .or_else(|| available.first().copied())
}

/// An id is an alias when it ends in `-latest` or does not end in `-` + 8 digits.
fn is_alias(id: &str) -> bool {
    if id.ends_with("-latest") {
        return true;
    }
    let bytes = id.as_bytes();
    let dated = bytes.len() >= 9
        && bytes[bytes.len() - 9] == b'-'
        && bytes[bytes.len() - 8..].iter().all(u8::is_ascii_digit);
    !dated
}

/// An approximation of JavaScript's `localeCompare` (ICU root collation) that is exact for
/// model ids: case-insensitive first, punctuation before digits before letters, then lower
/// case before upper case.
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    fn class(c: char) -> u8 {
        if c.is_alphabetic() {
            2
        } else if c.is_numeric() {
            1
        } else {
            0
        }
    }
    let key = |c: char| (class(c), c.to_lowercase().next().unwrap_or(c));
    let primary = a.chars().map(key).cmp(b.chars().map(key));
    primary.then_with(|| {
        // Tertiary: lower case sorts before upper case.
        a.chars()
            .map(|c| c.is_uppercase())
            .cmp(b.chars().map(|c| c.is_uppercase()))
    })
}

/// The reference's `findExactModelReferenceMatch` (§6.1): `provider/id`, then a split at the
/// first `/`, then a bare id; ambiguity means no match. Case-insensitive.
pub fn find_exact_model_reference<'a>(reference: &str, models: &[&'a Model]) -> Option<&'a Model> {
    let trimmed = reference.trim();
    if trimmed.is_empty() {
        return None;
    }
    let lower = trimmed.to_lowercase();
    let canonical: Vec<&Model> = models
        .iter()
        .copied()
        .filter(|model| model.reference().to_lowercase() == lower)
        .collect();
    match canonical.len() {
        1 => return Some(canonical[0]),
        n if n > 1 => return None,
        _ => {}
    }
    if let Some((provider, id)) = trimmed.split_once('/') {
        let (provider, id) = (provider.trim().to_lowercase(), id.trim().to_lowercase());
        if !provider.is_empty() && !id.is_empty() {
            let matches: Vec<&Model> = models
                .iter()
                .copied()
                .filter(|model| {
                    model.provider.to_lowercase() == provider && model.id.to_lowercase() == id
                })
                .collect();
            match matches.len() {
                1 => return Some(matches[0]),
                n if n > 1 => return None,
                _ => {}
            }
        }
    }
    let by_id: Vec<&Model> = models
        .iter()
        .copied()
        .filter(|model| model.id.to_lowercase() == lower)
        .collect();
    (by_id.len() == 1).then(|| by_id[0])
}

/// The reference's `tryMatchModel` (§6.2): an exact reference, else a substring of id or name,
/// preferring aliases, the one that sorts last.
pub fn try_match_model<'a>(pattern: &str, models: &[&'a Model]) -> Option<&'a Model> {
    if let Some(exact) = find_exact_model_reference(pattern, models) {
        return Some(exact);
    }
    let needle = pattern.to_lowercase();
    let matches: Vec<&Model> = models
        .iter()
        .copied()
        .filter(|model| {
            model.id.to_lowercase().contains(&needle) || model.name.to_lowercase().contains(&needle)
        })
        .collect();
    let (aliases, dated): (Vec<&Model>, Vec<&Model>) =
        matches.into_iter().partition(|model| is_alias(&model.id));
    let pool = if aliases.is_empty() { dated } else { aliases };
    // Sort descending and take the first: the last in ascending order, first one on ties.
    let mut best: Option<&Model> = None;
    for model in pool {
        match best {
            Some(current) if locale_compare(&model.id, &current.id) != Ordering::Greater => {}
            _ => best = Some(model),
        }
    }
    best
}

/// A pattern's match: the model, an explicit `:level`, and a warning to show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PatternMatch<'a> {
    /// The model found.
    pub model: Option<&'a Model>,
    /// The `:level` suffix, when valid and used.
    pub thinking: Option<ThinkingLevel>,
    /// A warning for the user.
    pub warning: Option<String>,
}

/// How an invalid `:suffix` is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuffixMode {
    /// `--model`: an invalid suffix is part of the id (no match if that fails).
    Strict,
    /// `--models`, `enabledModels`: the suffix is dropped with a warning.
    Scope,
}

/// The reference's `parseModelPattern` (§6.3): the whole pattern first, then the part before
/// the last `:` with the suffix as a thinking level.
pub fn parse_model_pattern<'a>(
    pattern: &str,
    models: &[&'a Model],
    mode: SuffixMode,
) -> PatternMatch<'a> {
    if let Some(model) = try_match_model(pattern, models) {
        return PatternMatch {
            model: Some(model),
            ..PatternMatch::default()
        };
    }
    let Some((prefix, suffix)) = pattern.rsplit_once(':') else {
        return PatternMatch::default();
    };
    match ThinkingLevel::parse(suffix) {
        Some(level) => {
            let inner = parse_model_pattern(prefix, models, mode);
            if inner.model.is_some() {
                return PatternMatch {
                    thinking: if inner.warning.is_some() {
                        None
                    } else {
                        Some(level)
                    },
                    ..inner
                };
            }
            inner
        }
        None => {
            if mode == SuffixMode::Strict {
                return PatternMatch::default();
            }
            let inner = parse_model_pattern(prefix, models, mode);
            if inner.model.is_some() {
                return PatternMatch {
                    model: inner.model,
                    thinking: None,
                    warning: Some(format!(
                        "Invalid thinking level \"{suffix}\" in pattern \"{pattern}\". Using default instead."
                    )),
                };
            }
            inner
        }
    }
}

/// The result of resolving `--provider`/`--model`.
#[derive(Clone, Debug, PartialEq)]
pub struct CliModel {
    /// The model (a clone: it may be synthesised).
    pub model: Model,
    /// The `:level` given with the model.
    pub thinking: Option<ThinkingLevel>,
    /// A warning to print.
    pub warning: Option<String>,
}

/// The reference's `resolveCliModel` (§6.4) over **all** models. `Ok(None)` without
/// `--model`; `Err` with the reference's error text.
pub fn resolve_cli_model(
    provider: Option<&str>,
    model: Option<&str>,
    registry: &ModelRegistry,
) -> Result<Option<CliModel>, String> {
    let Some(cli_model) = model else {
        return Ok(None);
    };
    let all: Vec<&Model> = registry.all().iter().collect();
    if all.is_empty() {
        return Err(
            "No models available. Check your installation or add models to models.json.".into(),
        );
    }
    let canonical_provider = |name: &str| -> Option<String> {
        let lower = name.to_lowercase();
        registry
            .all()
            .iter()
            .rev()
            .find(|model| model.provider.to_lowercase() == lower)
            .map(|model| model.provider.clone())
    };
    let mut resolved_provider = match provider {
        Some(name) => match canonical_provider(name) {
            Some(found) => Some(found),
            None => {
                return Err(format!(
                    "Unknown provider \"{name}\". Use --list-models to see available providers/models."
                ));
            }
        },
        None => None,
    };
    let exact_anywhere = |input: &str| -> Option<&Model> {
        let lower = input.to_lowercase();
        all.iter().copied().find(|model| {
            model.id.to_lowercase() == lower || model.reference().to_lowercase() == lower
        })
    };
    let found = |model: &Model, thinking, warning| {
        Ok(Some(CliModel {
            model: model.clone(),
            thinking,
            warning,
        }))
    };

    let mut pattern = cli_model.to_owned();
    let mut inferred = false;
    if resolved_provider.is_none()
        && let Some((maybe_provider, rest)) = cli_model.split_once('/')
        && let Some(canonical) = canonical_provider(maybe_provider)
    {
        resolved_provider = Some(canonical);
        pattern = rest.to_owned();
        inferred = true;
    }
    if resolved_provider.is_none()
        && let Some(model) = exact_anywhere(cli_model)
    {
        return found(model, None, None);
    }
    if provider.is_some()
        && let Some(name) = &resolved_provider
    {
        let prefix = format!("{name}/");
        if cli_model.to_lowercase().starts_with(&prefix.to_lowercase()) {
            pattern = cli_model[prefix.len()..].to_owned();
        }
    }
    let candidates: Vec<&Model> = match &resolved_provider {
        Some(name) => all
            .iter()
            .copied()
            .filter(|model| &model.provider == name)
            .collect(),
        None => all.clone(),
    };
    let matched = parse_model_pattern(&pattern, &candidates, SuffixMode::Strict);
    if let Some(model) = matched.model {
        return found(model, matched.thinking, matched.warning);
    }
    if inferred {
        if let Some(model) = exact_anywhere(cli_model) {
            return found(model, None, None);
        }
        let fallback = parse_model_pattern(cli_model, &all, SuffixMode::Strict);
        if let Some(model) = fallback.model {
            return found(model, fallback.thinking, fallback.warning);
        }
    }
    if let Some(name) = &resolved_provider {
        let provider_models: Vec<&Model> = all
            .iter()
            .copied()
            .filter(|model| &model.provider == name)
            .collect();
        let base = default_model_for(name)
            .and_then(|id| provider_models.iter().find(|model| model.id == id).copied())
            .or_else(|| provider_models.first().copied());
        if let Some(base) = base {
            let mut synthesized = base.clone();
            synthesized.id = pattern.clone();
            synthesized.name = pattern.clone();
            let note = format!(
                "Model \"{pattern}\" not found for provider \"{name}\". Using custom model id."
            );
            let warning = match matched.warning {
                Some(previous) => format!("{previous} {note}"),
                None => note,
            };
            return Ok(Some(CliModel {
                model: synthesized,
                thinking: None,
                warning: Some(warning),
            }));
        }
    }
    let display = match &resolved_provider {
        Some(name) => format!("{name}/{pattern}"),
        None => cli_model.to_owned(),
    };
    Err(format!(
        "Model \"{display}\" not found. Use --list-models to see available models."
    ))
}

/// A model in scope, with the level its pattern named.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopedModel<'a> {
    /// The model.
    pub model: &'a Model,
    /// The pattern's `:level`, if any.
    pub thinking: Option<ThinkingLevel>,
}

/// The reference's `resolveModelScope` (§6.5) over the available models: globs match
/// `provider/id` or `id` case-insensitively (an optional valid `:level` split off), other
/// patterns go through [`parse_model_pattern`] in scope mode. Returns the scope and the
/// warnings to print.
pub fn resolve_model_scope<'a>(
    patterns: &[String],
    available: &[&'a Model],
) -> (Vec<ScopedModel<'a>>, Vec<String>) {
    let mut scoped: Vec<ScopedModel<'a>> = Vec::new();
    let mut warnings = Vec::new();
    let push = |scoped: &mut Vec<ScopedModel<'a>>, model: &'a Model, thinking| {
        if !scoped
            .iter()
            .any(|entry| entry.model.provider == model.provider && entry.model.id == model.id)
        {
            scoped.push(ScopedModel { model, thinking });
        }
    };
    for pattern in patterns {
        if pattern.contains(['*', '?', '[']) {
            let (glob, thinking) = match pattern.rsplit_once(':') {
                Some((head, suffix)) => match ThinkingLevel::parse(suffix) {
                    Some(level) => (head, Some(level)),
                    None => (pattern.as_str(), None),
                },
                None => (pattern.as_str(), None),
            };
            let matcher = GlobBuilder::new(glob)
                .case_insensitive(true)
                .literal_separator(true)
                .build()
                .map(|glob| glob.compile_matcher());
            let matching: Vec<&'a Model> = match &matcher {
                Ok(matcher) => available
                    .iter()
                    .copied()
                    .filter(|model| {
                        matcher.is_match(model.reference()) || matcher.is_match(&model.id)
                    })
                    .collect(),
                Err(_) => Vec::new(),
            };
            if matching.is_empty() {
                warnings.push(format!("No models match pattern \"{pattern}\""));
                continue;
            }
            for model in matching {
                push(&mut scoped, model, thinking);
            }
            continue;
        }
        let matched = parse_model_pattern(pattern, available, SuffixMode::Scope);
        if let Some(warning) = matched.warning {
            warnings.push(warning);
        }
        match matched.model {
            Some(model) => push(&mut scoped, model, matched.thinking),
            None => warnings.push(format!("No models match pattern \"{pattern}\"")),
        }
    }
    (scoped, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked examples of the spec were written against 0.73.1's built-in table; they run
    /// over that table (kept as a fixture since the 1.6.0 catalog replaced it).
    fn recorded_registry() -> ModelRegistry {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/providers/models-json/builtin-0.73.1.catalog.json");
        let file: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).expect("the 0.73.1 table"))
                .expect("valid JSON");
        let models: Vec<crate::ai::Model> =
            serde_json::from_value(file["models"].clone()).expect("models");
        ModelRegistry::from_models(models)
    }

    fn resolve(
        provider: Option<&str>,
        model: &str,
    ) -> Result<(String, Option<ThinkingLevel>, Option<String>), String> {
        let registry = recorded_registry();
        resolve_cli_model(provider, Some(model), &registry).map(|found| {
            let found = found.unwrap();
            (found.model.reference(), found.thinking, found.warning)
        })
    }

    #[test]
    fn worked_examples_of_the_spec_resolve_the_same() {
        assert_eq!(
            resolve(Some("anthropic"), "sonnet").unwrap().0,
            "anthropic/claude-sonnet-4-6"
        );
        assert_eq!(
            resolve(None, "sonnet").unwrap().0,
            "amazon-bedrock/us.anthropic.claude-sonnet-4-6"
        );
        let (model, level, _) = resolve(None, "sonnet:high").unwrap();
        assert_eq!(model, "amazon-bedrock/us.anthropic.claude-sonnet-4-6");
        assert_eq!(level, Some(ThinkingLevel::High));
        assert_eq!(
            resolve(None, "anthropic/claude-opus-4-7:xhigh").unwrap(),
            (
                "anthropic/claude-opus-4-7".to_owned(),
                Some(ThinkingLevel::Xhigh),
                None
            )
        );
        assert_eq!(resolve(None, "zai/glm-5").unwrap().0, "zai/glm-5v-turbo");
        let (model, _, warning) = resolve(Some("anthropic"), "nonexist").unwrap();
        assert_eq!(model, "anthropic/nonexist");
        assert_eq!(
            warning.as_deref(),
            Some("Model \"nonexist\" not found for provider \"anthropic\". Using custom model id.")
        );
        let (model, _, warning) = resolve(None, "openai/gpt-4o:extended").unwrap();
        assert_eq!(model, "openai/gpt-4o:extended");
        assert!(warning.is_some());
        assert_eq!(
            resolve(Some("nope"), "x").unwrap_err(),
            "Unknown provider \"nope\". Use --list-models to see available providers/models."
        );
        assert_eq!(
            resolve(None, "definitely-not-a-model").unwrap_err(),
            "Model \"definitely-not-a-model\" not found. Use --list-models to see available models."
        );
    }

    #[test]
    fn scope_patterns_glob_and_warn() {
        let registry = recorded_registry();
        let available: Vec<&Model> = registry
            .all()
            .iter()
            .filter(|model| model.provider == "anthropic")
            .collect();
        let (scoped, warnings) = resolve_model_scope(
            &[
                "anthropic/*sonnet*:high".to_owned(),
                "opus-4-7:bogus".to_owned(),
                "nothing-here".to_owned(),
            ],
            &available,
        );
        assert!(
            scoped
                .iter()
                .all(|entry| entry.model.provider == "anthropic")
        );
        assert!(
            scoped
                .iter()
                .any(|entry| entry.model.id == "claude-sonnet-4-5"
                    && entry.thinking == Some(ThinkingLevel::High))
        );
        assert!(
            scoped
                .iter()
                .any(|entry| entry.model.id == "claude-opus-4-7" && entry.thinking.is_none())
        );
        assert_eq!(
            warnings,
            [
                "Invalid thinking level \"bogus\" in pattern \"opus-4-7:bogus\". Using default instead.",
                "No models match pattern \"nothing-here\""
            ]
        );
    }

    #[test]
    fn aliases_and_collation() {
        assert!(is_alias("claude-sonnet-4-5"));
        assert!(!is_alias("claude-3-7-sonnet-20250219"));
        assert!(is_alias("x-latest"));
        assert_eq!(locale_compare("a:1", "a1"), std::cmp::Ordering::Less);
        assert_eq!(
            locale_compare("claude-sonnet-4-6", "claude-sonnet-4-5"),
            std::cmp::Ordering::Greater
        );
        assert_eq!(locale_compare("B", "a"), std::cmp::Ordering::Greater);
        assert_eq!(locale_compare("a", "A"), std::cmp::Ordering::Less);
    }
}
