//! A remote's connection: its `postgres://` URL as libpq reads it (with `sslmode` and
//! `sslrootcert` taken out and handled here, as the driver accepts only `disable`, `prefer`
//! and `require`), and the password lookup in a `.pgpass` file's text.
//!
//! Invariant: pure (the caller reads files and the environment).

use std::str::FromStr;
use std::time::Duration;

use crate::remote::{RemoteError, Result};

/// How the connection is protected (libpq's `sslmode` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS when the server offers it, without checking its certificate (libpq's default).
    Prefer,
    /// TLS always, without checking the certificate (libpq's `require` without a root file).
    Require,
    /// TLS with the certificate checked against the roots, not the host name.
    VerifyCa,
    /// TLS with the certificate and the host name checked.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self> {
        match value {
            "disable" => Ok(Self::Disable),
            "allow" | "prefer" => Ok(Self::Prefer),
            "require" => Ok(Self::Require),
            "verify-ca" => Ok(Self::VerifyCa),
            "verify-full" => Ok(Self::VerifyFull),
            other => Err(RemoteError::BadUrl(format!(
                "sslmode '{other}' is not one of disable, prefer, require, verify-ca, verify-full"
            ))),
        }
    }

    /// libpq's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// A parsed remote URL.
#[derive(Debug, Clone)]
pub struct RemoteUrl {
    /// The URL without `sslmode` and `sslrootcert`, as the driver reads it.
    driver_url: String,
    /// The driver's configuration of it.
    config: tokio_postgres::Config,
    /// How TLS is used.
    pub ssl: SslMode,
    /// The `sslrootcert` file named in the URL.
    pub root_cert: Option<String>,
}

/// Splits `key=value&…` and percent-decodes the value.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut idx = 0;
    while idx < bytes.len() {
        match bytes[idx] {
            b'%' if idx + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[idx + 1..idx + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(byte) => {
                        out.push(byte);
                        idx += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        idx += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                idx += 1;
            }
            byte => {
                out.push(byte);
                idx += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl RemoteUrl {
    /// Parses a `postgres://` or `postgresql://` URL.
    pub fn parse(url: &str) -> Result<Self> {
        let url = url.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(RemoteError::BadUrl(
                "a remote is a postgres://user@host:port/database URL".to_owned(),
            ));
        }
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (url, None),
        };
        let mut ssl = SslMode::Prefer;
        let mut root_cert = None;
        let mut kept = Vec::new();
        for pair in query
            .unwrap_or("")
            .split('&')
            .filter(|pair| !pair.is_empty())
        {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => ssl = SslMode::parse(&decode(value))?,
                "sslrootcert" => root_cert = Some(decode(value)),
                _ => kept.push(pair),
            }
        }
        let driver_url = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let config = tokio_postgres::Config::from_str(&driver_url)
            .map_err(|error| RemoteError::BadUrl(error.to_string()))?;
        if config.get_hosts().is_empty() {
            return Err(RemoteError::BadUrl("the URL names no host".to_owned()));
        }
        Ok(Self {
            driver_url,
            config,
            ssl,
            root_cert,
        })
    }

    /// The first host, as text (a Unix socket directory as its path).
    pub fn host(&self) -> String {
        match self.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            Some(tokio_postgres::config::Host::Unix(path)) => path.to_string_lossy().into_owned(),
            None => String::new(),
        }
    }

    /// The first port (5432 when none is given).
    pub fn port(&self) -> u16 {
        self.config.get_ports().first().copied().unwrap_or(5432)
    }

    /// The user named in the URL.
    pub fn user(&self) -> Option<&str> {
        self.config.get_user()
    }

    /// The database named in the URL (the user's name when none is).
    pub fn dbname(&self) -> Option<&str> {
        self.config.get_dbname()
    }

    /// Whether the URL carries a password.
    pub fn has_password(&self) -> bool {
        self.config.get_password().is_some()
    }

    /// The URL with its password replaced by `***`, for listings.
    pub fn redacted(url: &str) -> String {
        let Some((scheme, rest)) = url.split_once("://") else {
            return url.to_owned();
        };
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => {
                    format!("{scheme}://{user}:***@{host}{}", &rest[authority_end..])
                }
                None => url.to_owned(),
            },
            None => url.to_owned(),
        }
    }
}

/// Everything needed to connect to one remote: its name, URL, the resolved password and
/// the root certificates for `verify-ca`/`verify-full`.
#[derive(Debug, Clone)]
pub struct Target {
    /// The remote's name in this agent dir.
    pub name: String,
    /// The parsed URL.
    pub url: RemoteUrl,
    /// The password when the URL has none (`PGPASSWORD`, `.pgpass`, a `!command`).
    pub password: Option<String>,
    /// The user when the URL names none (the login name, as libpq takes it).
    pub default_user: String,
    /// PEM text of the root certificates (`sslrootcert`); `None`: the system's roots.
    pub root_pem: Option<Vec<u8>>,
    /// How long connecting may take.
    pub connect_timeout: Duration,
}

impl Target {
    /// The driver's configuration: the URL with user, password, timeout and TLS mode filled in.
    pub fn driver_config(&self) -> Result<tokio_postgres::Config> {
        let mut config = tokio_postgres::Config::from_str(&self.url.driver_url)
            .map_err(|error| RemoteError::BadUrl(error.to_string()))?;
        if config.get_user().is_none() {
            config.user(&self.default_user);
        }
        if config.get_password().is_none()
            && let Some(password) = &self.password
        {
            config.password(password);
        }
        config.connect_timeout(self.connect_timeout);
        config.application_name("pi");
        config.ssl_mode(match self.url.ssl {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        });
        Ok(config)
    }
}

/// Splits one `.pgpass` line into its five fields (`\:` and `\\` unescaped); `None` for a
/// comment or a line of another shape.
fn pgpass_fields(line: &str) -> Option<Vec<String>> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let mut fields = Vec::with_capacity(5);
    let mut current = String::new();
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => current.push(chars.next().unwrap_or('\\')),
            ':' if fields.len() < 4 => fields.push(std::mem::take(&mut current)),
            other => current.push(other),
        }
    }
    fields.push(current);
    (fields.len() == 5).then_some(fields)
}

/// Looks a password up in the text of a `.pgpass` file as libpq does: the first line whose
/// host, port, database and user match (`*` matches anything; `localhost` also matches a
/// Unix socket).
pub fn pgpass_lookup(
    text: &str,
    host: &str,
    port: u16,
    dbname: &str,
    user: &str,
) -> Option<String> {
    let port = port.to_string();
    let host = if host.starts_with('/') {
        "localhost"
    } else {
        host
    };
    text.lines().filter_map(pgpass_fields).find_map(|fields| {
        let matches = |pattern: &str, value: &str| pattern == "*" || pattern == value;
        (matches(&fields[0], host)
            && matches(&fields[1], &port)
            && matches(&fields[2], dbname)
            && matches(&fields[3], user))
        .then(|| fields[4].clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_root_cert_are_taken_out_of_the_url() {
        let url = RemoteUrl::parse(
            "postgres://alice@db.example:6543/team?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(url.ssl, SslMode::VerifyFull);
        assert_eq!(url.root_cert.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(url.host(), "db.example");
        assert_eq!(url.port(), 6543);
        assert_eq!(url.user(), Some("alice"));
        assert_eq!(url.dbname(), Some("team"));
        assert!(RemoteUrl::parse("postgres://h/db?sslmode=bogus").is_err());
        assert!(RemoteUrl::parse("mysql://h/db").is_err());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            RemoteUrl::redacted("postgres://bob:s3cret@h:5432/db?sslmode=require"),
            "postgres://bob:***@h:5432/db?sslmode=require"
        );
        assert_eq!(
            RemoteUrl::redacted("postgres://bob@h/db"),
            "postgres://bob@h/db"
        );
    }

    #[test]
    fn pgpass_lines_match_as_libpq_reads_them() {
        let text =
            "# comment\nother:5432:*:bob:no\ndb.example:*:team:bob:pa\\:ss\n*:*:*:*:fallback\n";
        assert_eq!(
            pgpass_lookup(text, "db.example", 6543, "team", "bob").as_deref(),
            Some("pa:ss")
        );
        assert_eq!(
            pgpass_lookup(text, "x", 1, "y", "z").as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_lookup("h:1:d:u\n", "h", 1, "d", "u"), None);
    }
}
