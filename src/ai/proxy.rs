//! Which proxy a request goes through: 1.6.0's transport (undici's `EnvHttpProxyAgent`, with
//! the `httpProxy` setting applied as `HTTP_PROXY`/`HTTPS_PROXY` where those are unset).
//!
//! Rules (undici's, which the reference installs as its global dispatcher):
//! - `http:` URLs use `http_proxy`, else `HTTP_PROXY`; `https:` URLs use `https_proxy`, else
//!   `HTTPS_PROXY`, else the HTTP proxy; an empty value means none. The `httpProxy` setting
//!   stands in for `HTTP_PROXY` and `HTTPS_PROXY` when they are not set at all.
//! - `no_proxy`, else `NO_PROXY`: entries split at commas and whitespace; `*` bypasses every
//!   host; `host`, `.host` and `host:port` bypass the host and its subdomains (on that port);
//!   `*.host` only the subdomains; IPv6 as `::1` or `[::1]:443`. Host names compare
//!   case-insensitively, a trailing dot ignored.
//!
//! Departure: the reference tunnels plain-`http:` origins through `CONNECT` too
//! (`proxyTunnel: true`); reqwest sends them to the proxy in absolute form. HTTPS origins are
//! tunnelled with `CONNECT` by both.
//!
//! Pure: the values come in from the caller (`cli` reads the environment and settings).

/// One `NO_PROXY` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NoProxyEntry {
    host: String,
    port: u16,
    wildcard: bool,
}

/// The proxies of a process, as resolved from its environment and settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    http: Option<String>,
    https: Option<String>,
    no_proxy: Vec<NoProxyEntry>,
}

impl ProxyConfig {
    /// No proxy at all.
    pub fn none() -> Self {
        Self::default()
    }

    /// Resolves the proxies from environment lookups (`var` returns a variable's value when
    /// it is set, empty or not) and the global `httpProxy` setting.
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
        http_proxy_setting: Option<&str>,
    ) -> Self {
        let setting = http_proxy_setting
            .map(str::trim)
            .filter(|proxy| !proxy.is_empty())
            .map(str::to_owned);
        let upper = |name: &str| var(name).or_else(|| setting.clone());
        let http = var("http_proxy")
            .or_else(|| upper("HTTP_PROXY"))
            .filter(|proxy| !proxy.is_empty());
        let https = var("https_proxy")
            .or_else(|| upper("HTTPS_PROXY"))
            .filter(|proxy| !proxy.is_empty())
            .or_else(|| http.clone());
        let no_proxy = var("no_proxy")
            .or_else(|| var("NO_PROXY"))
            .unwrap_or_default();
        Self {
            http,
            https,
            no_proxy: parse_no_proxy(&no_proxy),
        }
    }

    /// Whether any proxy is configured.
    pub fn is_empty(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// The proxy URL for a request to `url`, or `None` to connect directly.
    pub fn proxy_for(&self, url: &reqwest::Url) -> Option<&str> {
        let scheme = url.scheme();
        let proxy = match scheme {
            "https" => self.https.as_deref(),
            _ => self.http.as_deref(),
        }?;
        let raw = url.host_str().unwrap_or("");
        let mut host = raw
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(raw)
            .to_ascii_lowercase();
        if host.len() > 1 && host.ends_with('.') {
            host.pop();
        }
        let port = url.port_or_known_default().unwrap_or(0);
        self.should_proxy(&host, port).then_some(proxy)
    }

    fn should_proxy(&self, host: &str, port: u16) -> bool {
        for entry in &self.no_proxy {
            if entry.port != 0 && entry.port != port {
                continue;
            }
            if entry.host == "*" {
                return false;
            }
            if !entry.wildcard && host == entry.host {
                return false;
            }
            if host.len() > entry.host.len()
                && host.ends_with(&entry.host)
                && host.as_bytes()[host.len() - entry.host.len() - 1] == b'.'
            {
                return false;
            }
        }
        true
    }
}

fn parse_no_proxy(value: &str) -> Vec<NoProxyEntry> {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (host, port) = match entry
                .strip_prefix('[')
                .and_then(|rest| rest.split_once("]:"))
                .filter(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
            {
                Some((host, port)) => (host.to_owned(), port.parse().unwrap_or(0)),
                None => {
                    let unbracketed = entry
                        .strip_prefix('[')
                        .and_then(|rest| rest.strip_suffix(']'))
                        .unwrap_or(entry);
                    match unbracketed.split_once(':') {
                        Some((host, port))
                            if unbracketed.matches(':').count() == 1
                                && !host.is_empty()
                                && !port.is_empty()
                                && port.bytes().all(|b| b.is_ascii_digit()) =>
                        {
                            (host.to_owned(), port.parse().unwrap_or(0))
                        }
                        _ => (unbracketed.to_owned(), 0),
                    }
                }
            };
            let host = host
                .strip_prefix("*.")
                .or_else(|| host.strip_prefix('.'))
                .unwrap_or(&host);
            let host = match host.strip_suffix('.') {
                Some(trimmed) if !trimmed.is_empty() => trimmed,
                _ => host,
            };
            NoProxyEntry {
                host: host.to_ascii_lowercase(),
                port,
                wildcard: entry.starts_with('*'),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(vars: &[(&str, &str)], setting: Option<&str>) -> ProxyConfig {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ProxyConfig::from_env(|name| vars.get(name).cloned(), setting)
    }

    fn via<'a>(config: &'a ProxyConfig, url: &str) -> Option<&'a str> {
        config.proxy_for(&reqwest::Url::parse(url).unwrap())
    }

    #[test]
    fn schemes_pick_their_variables_lowercase_first() {
        let both = config(
            &[
                ("HTTP_PROXY", "http://upper:1"),
                ("http_proxy", "http://lower:1"),
                ("HTTPS_PROXY", "http://secure:2"),
            ],
            None,
        );
        assert_eq!(via(&both, "http://api.test/v1"), Some("http://lower:1"));
        assert_eq!(via(&both, "https://api.test/v1"), Some("http://secure:2"));
        let http_only = config(&[("HTTP_PROXY", "http://p:3")], None);
        assert_eq!(via(&http_only, "https://api.test"), Some("http://p:3"));
        assert_eq!(via(&config(&[], None), "https://api.test"), None);
        assert_eq!(
            via(&config(&[("HTTPS_PROXY", "")], None), "https://a"),
            None
        );
    }

    #[test]
    fn the_setting_stands_in_for_unset_variables_only() {
        let setting = config(&[], Some(" http://corp:8080 "));
        assert_eq!(via(&setting, "https://api.test"), Some("http://corp:8080"));
        assert_eq!(via(&setting, "http://api.test"), Some("http://corp:8080"));
        let env_wins = config(&[("HTTPS_PROXY", "http://env:1")], Some("http://corp:8080"));
        assert_eq!(via(&env_wins, "https://api.test"), Some("http://env:1"));
        assert_eq!(via(&env_wins, "http://api.test"), Some("http://corp:8080"));
        // Set but empty: no proxy, the setting does not apply (`??=`).
        let empty = config(
            &[("HTTPS_PROXY", ""), ("HTTP_PROXY", "")],
            Some("http://c:1"),
        );
        assert_eq!(via(&empty, "https://api.test"), None);
    }

    #[test]
    fn no_proxy_entries_follow_undici() {
        let cfg = config(
            &[
                ("HTTPS_PROXY", "http://p:1"),
                ("HTTP_PROXY", "http://p:1"),
                (
                    "NO_PROXY",
                    "internal.test, .corp.test *.wild.test,127.0.0.1:8080 [::1]:443",
                ),
            ],
            None,
        );
        assert_eq!(via(&cfg, "https://internal.test"), None);
        assert_eq!(via(&cfg, "https://a.internal.test"), None);
        assert_eq!(via(&cfg, "https://INTERNAL.test./x"), None);
        assert_eq!(via(&cfg, "https://corp.test"), None);
        assert_eq!(via(&cfg, "https://x.corp.test"), None);
        assert_eq!(via(&cfg, "https://wild.test"), Some("http://p:1"));
        assert_eq!(via(&cfg, "https://a.wild.test"), None);
        assert_eq!(via(&cfg, "http://127.0.0.1:8080"), None);
        assert_eq!(via(&cfg, "http://127.0.0.1:9090"), Some("http://p:1"));
        assert_eq!(via(&cfg, "https://[::1]/"), None);
        assert_eq!(via(&cfg, "https://notinternal.test"), Some("http://p:1"));
        let all = config(&[("HTTP_PROXY", "http://p:1"), ("no_proxy", "x, *")], None);
        assert_eq!(via(&all, "http://anything"), None);
    }
}
