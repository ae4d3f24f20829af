//! The `google-vertex` wire protocol (Vertex AI's Gemini endpoint), as 1.6.0's
//! `api/google-vertex.js` drives `@google/genai` in Vertex mode. The body and the stream are
//! the Gemini API's ([`crate::ai::google`]: `build_body`, `GoogleDecoder`); what differs is
//! where the request goes and how it is authorised:
//!
//! - an API key (Vertex express mode: not empty, not the `gcp-vertex-credentials` marker, not
//!   a `<placeholder>` such as `<authenticated>`) goes in `x-goog-api-key`, to
//!   `https://aiplatform.googleapis.com/v1/publishers/google/models/<id>:streamGenerateContent?alt=sse`;
//! - otherwise Application Default Credentials: the project (`GOOGLE_CLOUD_PROJECT`, else
//!   `GCLOUD_PROJECT`) and location (`GOOGLE_CLOUD_LOCATION`) are required, and the key file
//!   ([`crate::ai::CloudCredentials::GoogleKeyFile`]) gives an access token
//!   ([`crate::ai::google_auth`]) sent as `Authorization: Bearer`. The endpoint is
//!   `https://<location>-aiplatform.googleapis.com/v1/projects/<p>/locations/<l>/publishers/google/models/<id>:streamGenerateContent?alt=sse`
//!   (`aiplatform.googleapis.com` for `global`, `aiplatform.<l>.rep.googleapis.com` for the
//!   multi-regions `us` and `eu`);
//! - a custom base URL (the model's, unless empty or holding `{location}` as the built-in
//!   table's does) replaces the host and the project path (`ResourceScope.COLLECTION`):
//!   `<base>/v1/publishers/google/models/<id>:…`, without `/v1` when the base already names a
//!   version (`/v1`, `/v1beta1`).
//!
//! Failures before sending (no project, no location, no readable key file) end the call with
//! the reference's text and no `start` event. A stream without a finish reason is `Google
//! Vertex stream ended without a finish reason`. Pure.

use crate::ai::google::{self, GoogleDecoder};
use crate::ai::google_auth::{AdcCredentials, NO_CREDENTIALS};
use crate::ai::models::Model;
use crate::ai::request::identity_headers;
use crate::ai::transcript::normalize_context;
use crate::ai::transport::{WireRequest, set_header_ci};
use crate::ai::{CloudCredentials, Request, StreamOptions};
use crate::model::message::AssistantMessage;

/// The key the coding agent stores for "use ADC" (`GCP_VERTEX_CREDENTIALS_MARKER`).
pub const CREDENTIALS_MARKER: &str = "gcp-vertex-credentials";

/// The API version `@google/genai` is told to use.
const API_VERSION: &str = "v1";

/// The provider settings this protocol reads at request time.
pub const PROVIDER_ENV_NAMES: &[&str] = &[
    "GOOGLE_CLOUD_PROJECT",
    "GCLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// Returns the key when it is a real Vertex API key (`resolveApiKey`).
pub fn resolve_api_key(key: Option<&str>) -> Option<&str> {
    let key = key?.trim();
    let placeholder = key.len() > 2
        && key.starts_with('<')
        && key.ends_with('>')
        && !key[1..key.len() - 1].contains('>');
    (!key.is_empty() && key != CREDENTIALS_MARKER && !placeholder).then_some(key)
}

/// The model's base URL when it is a custom one (`resolveCustomBaseUrl`).
fn custom_base_url(base_url: &str) -> Option<&str> {
    let trimmed = base_url.trim();
    (!trimmed.is_empty() && !trimmed.contains("{location}")).then_some(trimmed)
}

/// Whether a path segment of the URL names an API version (`baseUrlIncludesApiVersion`).
fn includes_api_version(base_url: &str) -> bool {
    let path = match base_url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("", |at| &rest[at..]),
        None => base_url,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.split('/').any(|segment| {
        let Some(rest) = segment.strip_prefix('v') else {
            return false;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        let rest = &rest[digits..];
        rest.is_empty()
            || rest
                .strip_prefix("beta")
                .is_some_and(|tail| tail.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The model's resource path (`tModel` in Vertex mode).
fn model_path(id: &str) -> String {
    if id.starts_with("publishers/") || id.starts_with("projects/") || id.starts_with("models/") {
        return id.to_owned();
    }
    match id.split_once('/') {
        Some((publisher, model)) => {
            let model = model.split('/').next().unwrap_or(model);
            format!("publishers/{publisher}/models/{model}")
        }
        None => format!("publishers/google/models/{id}"),
    }
}

/// How the call is authorised.
enum Auth<'a> {
    ApiKey(&'a str),
    Adc { project: &'a str, location: &'a str },
}

/// The endpoint of a call (`ApiClient`'s base URL choice and `constructUrl`).
fn endpoint(model: &Model, auth: &Auth<'_>) -> String {
    let (root, prefix) = match (custom_base_url(&model.base_url), auth) {
        (Some(base), _) => {
            let root = base.strip_suffix('/').unwrap_or(base).to_owned();
            let version = !includes_api_version(base);
            let root = if version {
                format!("{root}/{API_VERSION}")
            } else {
                root
            };
            (root, None)
        }
        (None, Auth::ApiKey(_)) => (
            format!("https://aiplatform.googleapis.com/{API_VERSION}"),
            None,
        ),
        (None, Auth::Adc { project, location }) => {
            let host = match *location {
                "global" => "aiplatform.googleapis.com".to_owned(),
                "us" | "eu" => format!("aiplatform.{location}.rep.googleapis.com"),
                other => format!("{other}-aiplatform.googleapis.com"),
            };
            (
                format!("https://{host}/{API_VERSION}"),
                Some(format!("projects/{project}/locations/{location}")),
            )
        }
    };
    let path = model_path(&model.id);
    let path = match prefix {
        // A path that already names its project keeps it.
        Some(prefix) if !path.starts_with("projects/") => format!("{prefix}/{path}"),
        _ => path,
    };
    format!("{root}/{path}:streamGenerateContent?alt=sse")
}

/// One Vertex call: the request, and the key file whose token authorises it (none for an API
/// key).
#[derive(Debug)]
pub struct VertexRequest {
    /// URL, headers (without the bearer token) and body.
    pub wire: WireRequest,
    /// The credentials to get the `Authorization` token from.
    pub credentials: Option<AdcCredentials>,
}

/// Builds the request of one call (`stream` up to `generateContentStream`); `Err` with the
/// reference's text when it cannot be built.
pub fn build_request(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
) -> Result<VertexRequest, String> {
    let api_key = resolve_api_key(options.api_key.as_deref());
    let auth = match api_key {
        Some(key) => Auth::ApiKey(key),
        None => {
            let project = options
                .provider_env("GOOGLE_CLOUD_PROJECT")
                .or_else(|| options.provider_env("GCLOUD_PROJECT"))
                .ok_or("Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass project in options.")?;
            let location = options.provider_env("GOOGLE_CLOUD_LOCATION").ok_or(
                "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options.",
            )?;
            Auth::Adc { project, location }
        }
    };
    let mut headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    if let Auth::ApiKey(key) = auth {
        headers.push(("x-goog-api-key".to_owned(), key.to_owned()));
    }
    let mut configured = identity_headers(model, &options.identity);
    for (name, value) in model.headers.iter().flatten() {
        if let Some(value) = value.as_str() {
            configured.push((name.clone(), value.to_owned()));
        }
    }
    configured.extend(options.headers.iter().cloned());
    for (name, value) in configured {
        set_header_ci(&mut headers, &name, &value);
    }
    let transcript = normalize_context(request);
    let mut body = google::build_body(model, &transcript, options, google::BudgetTable::Vertex)?;
    vertex_key_order(&mut body);
    let credentials = match auth {
        Auth::ApiKey(_) => None,
        Auth::Adc { .. } => Some(match &options.cloud {
            CloudCredentials::GoogleKeyFile {
                text: Some(text), ..
            } => AdcCredentials::parse(text)?,
            _ => return Err(NO_CREDENTIALS.to_owned()),
        }),
    };
    Ok(VertexRequest {
        wire: WireRequest {
            url: endpoint(model, &auth),
            headers,
            body,
        },
        credentials,
    })
}

/// The decoder of a Vertex stream: Gemini's, with Vertex's wording for a missing finish
/// reason.
pub fn decoder(message: AssistantMessage, model: &Model) -> GoogleDecoder {
    GoogleDecoder::new(message, model)
        .with_no_finish_text("Google Vertex stream ended without a finish reason")
}

/// Replayed `functionCall`s in the key order 1.6.0 sends to Vertex (`name`, `args`, `id`: the
/// object as `google-shared.js` builds it; `@google/genai`'s Vertex path keeps it, where its
/// Gemini API path reorders to `args`, `id`, `name`).
fn vertex_key_order(body: &mut serde_json::Value) {
    let Some(contents) = body
        .get_mut("contents")
        .and_then(serde_json::Value::as_array_mut)
    else {
        return;
    };
    for content in contents {
        let Some(parts) = content
            .get_mut("parts")
            .and_then(serde_json::Value::as_array_mut)
        else {
            continue;
        };
        for part in parts {
            let Some(call) = part
                .get_mut("functionCall")
                .and_then(serde_json::Value::as_object_mut)
            else {
                continue;
            };
            let mut ordered = serde_json::Map::new();
            for key in ["name", "args", "id"] {
                if let Some(value) = call.remove(key) {
                    ordered.insert(key.to_owned(), value);
                }
            }
            ordered.append(call);
            *call = ordered;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(base_url: &str, id: &str) -> Model {
        let mut model = crate::ai::models::builtin_models()
            .iter()
            .find(|model| model.provider == "google-vertex" && model.id == "gemini-2.5-flash")
            .cloned()
            .expect("a built-in Vertex model");
        model.base_url = base_url.to_owned();
        model.id = id.to_owned();
        model
    }

    #[test]
    fn endpoints_are_chosen_as_the_sdk_chooses_them() {
        let builtin = "https://{location}-aiplatform.googleapis.com";
        let adc = |location| Auth::Adc {
            project: "p",
            location,
        };
        assert_eq!(
            endpoint(&model(builtin, "gemini-2.5-flash"), &adc("us-central1")),
            "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            endpoint(&model(builtin, "gemini-2.5-flash"), &adc("global")),
            "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            endpoint(&model(builtin, "gemini-2.5-flash"), &adc("eu")),
            "https://aiplatform.eu.rep.googleapis.com/v1/projects/p/locations/eu/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            endpoint(&model(builtin, "gemini-2.5-flash"), &Auth::ApiKey("k")),
            "https://aiplatform.googleapis.com/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            endpoint(
                &model(
                    "https://proxy.example/vertex/v1beta1/",
                    "anthropic/claude-x"
                ),
                &adc("us-central1")
            ),
            "https://proxy.example/vertex/v1beta1/publishers/anthropic/models/claude-x:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            endpoint(
                &model(" http://127.0.0.1:9/ ", "gemini-2.5-flash"),
                &adc("x")
            ),
            "http://127.0.0.1:9/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
    }

    #[test]
    fn placeholders_and_the_marker_are_not_keys() {
        assert_eq!(resolve_api_key(Some(" AQ.key ")), Some("AQ.key"));
        for key in ["", " ", "<authenticated>", "gcp-vertex-credentials", "<a>"] {
            assert_eq!(resolve_api_key(Some(key)), None, "{key}");
        }
        assert_eq!(resolve_api_key(Some("<a>b>")), Some("<a>b>"));
        assert_eq!(resolve_api_key(None), None);
    }

    #[test]
    fn versions_in_the_base_url_are_recognised() {
        assert!(includes_api_version("https://x/v1"));
        assert!(includes_api_version("https://x/a/v1beta1/b"));
        assert!(!includes_api_version("https://v1.example/"));
        assert!(!includes_api_version("https://x/v1alpha"));
        assert!(!includes_api_version("http://127.0.0.1:80"));
    }
}
