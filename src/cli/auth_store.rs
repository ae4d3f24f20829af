//! `<agent dir>/auth.json` as 1.6.0 keeps it (`core/auth-storage.js`): changed only under
//! its lock, the `proper-lockfile` lock both agents take — a directory `auth.json.lock` made
//! with `mkdir` beside the file (its real path), stale once its mtime is 30 s old —, then the
//! whole file rewritten as `JSON.stringify(data, null, 2)`. pi writes it all or nothing
//! (`support::atomic`, mode 0600; the directory is created 0700), so a reader never sees half
//! a file and two processes that refresh at once lose nothing: the second finds the first's
//! token under the lock and does not refresh again.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value};

use crate::ai::AiError;
use crate::ai::auth::{Change, CredentialStore};
use crate::support::term;

/// How old a lock directory is before it counts as abandoned (1.6.0: `stale: 30_000`).
pub const STALE_AFTER: Duration = Duration::from_secs(30);

/// The file store.
#[derive(Debug, Clone)]
pub struct FileCredentialStore {
    path: PathBuf,
}

fn io_error(what: &str, path: &Path, error: &std::io::Error) -> AiError {
    AiError::Config {
        message: format!(
            "cannot {what} {}: {error}",
            term::line(&path.to_string_lossy())
        ),
    }
}

/// A held lock; released (the directory removed) when dropped.
struct Lock {
    dir: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl FileCredentialStore {
    /// The store of `path` (`<agent dir>/auth.json`).
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// The lock directory: `<real path of auth.json>.lock` (proper-lockfile resolves links).
    fn lock_dir(&self) -> PathBuf {
        let real = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        let mut name = real.into_os_string();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Creates the directory (0700) and an empty `{}` file (0600) when missing, as 1.6.0
    /// does before it locks.
    fn ensure_file(&self) -> Result<(), AiError> {
        if let Some(dir) = self.path.parent()
            && !dir.exists()
        {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|error| io_error("create", dir, &error))?;
        }
        if !self.path.exists() {
            let written = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode_600()
                .open(&self.path)
                .and_then(|mut file| file.write_all(b"{}"));
            match written {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(io_error("create", &self.path, &error)),
            }
        }
        Ok(())
    }

    /// Takes the lock, waiting up to [`STALE_AFTER`] for another holder (a lock older than
    /// that is taken over).
    fn lock(&self) -> Result<Lock, AiError> {
        self.ensure_file()?;
        let dir = self.lock_dir();
        let deadline = Instant::now() + STALE_AFTER;
        let mut delay = Duration::from_millis(10);
        loop {
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Lock { dir }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = std::fs::metadata(&dir)
                        .and_then(|meta| meta.modified())
                        .ok()
                        .and_then(|modified| SystemTime::now().duration_since(modified).ok());
                    if age.is_some_and(|age| age > STALE_AFTER) {
                        let _ = std::fs::remove_dir(&dir);
                        continue;
                    }
                    if Instant::now() >= deadline {
                        return Err(AiError::Config {
                            message: format!(
                                "auth.json is locked by another process ({} exists)",
                                term::line(&dir.to_string_lossy())
                            ),
                        });
                    }
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_millis(500));
                }
                Err(error) => return Err(io_error("lock", &self.path, &error)),
            }
        }
    }

    fn read_text(&self) -> Result<Option<String>, AiError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error("read", &self.path, &error)),
        }
    }
}

/// `OpenOptions` with mode 0600.
trait Mode600 {
    fn mode_600(&mut self) -> &mut Self;
}

impl Mode600 for std::fs::OpenOptions {
    fn mode_600(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::mode(self, 0o600)
    }
}

impl CredentialStore for FileCredentialStore {
    fn read(&self) -> Result<Option<String>, AiError> {
        self.read_text()
    }

    fn modify(
        &self,
        provider: &str,
        change: &mut dyn FnMut(Option<&Value>) -> Result<Change, AiError>,
    ) -> Result<Option<String>, AiError> {
        let _lock = self.lock()?;
        let text = self.read_text()?;
        let mut data: Map<String, Value> = match text.as_deref().map(str::trim) {
            None | Some("") => Map::new(),
            Some(text) => match serde_json::from_str(text.trim_start_matches('\u{feff}')) {
                Ok(Value::Object(data)) => data,
                // 1.6.0 refuses to rewrite a file it cannot parse; so does pi.
                _ => {
                    return Err(AiError::Config {
                        message: format!(
                            "{} is not a JSON object; fix or remove it, then sign in again",
                            term::line(&self.path.to_string_lossy())
                        ),
                    });
                }
            },
        };
        match change(data.get(provider))? {
            Change::Keep => return Ok(text),
            Change::Set(entry) => {
                data.insert(provider.to_owned(), entry);
            }
            Change::Remove => {
                data.shift_remove(provider);
            }
        }
        let next = crate::support::json::to_js_pretty(&Value::Object(data));
        crate::support::atomic::write_atomically_with_mode(&self.path, 0o600, |out| {
            out.write_all(next.as_bytes())
        })
        .map_err(|error: std::io::Error| io_error("write", &self.path, &error))?;
        // An existing file keeps an administrator's mode in 1.6.0; pi's rename replaces the
        // file, so the new one is private.
        let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600));
        Ok(Some(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(value: &str) -> impl FnMut(Option<&Value>) -> Result<Change, AiError> {
        let value = value.to_owned();
        move |_| {
            Ok(Change::Set(
                serde_json::json!({ "type": "api_key", "key": value }),
            ))
        }
    }

    #[test]
    fn changes_keep_other_entries_and_write_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent/auth.json");
        let store = FileCredentialStore::new(path.clone());
        store.modify("openai", &mut set("k1")).unwrap();
        store.modify("groq", &mut set("k2")).unwrap();
        let text = store
            .modify("openai", &mut |_| Ok(Change::Keep))
            .unwrap()
            .unwrap();
        assert_eq!(
            text,
            "{\n  \"openai\": {\n    \"type\": \"api_key\",\n    \"key\": \"k1\"\n  },\n  \"groq\": {\n    \"type\": \"api_key\",\n    \"key\": \"k2\"\n  }\n}"
        );
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        store.modify("openai", &mut |_| Ok(Change::Remove)).unwrap();
        assert!(!std::fs::read_to_string(&path).unwrap().contains("openai"));
        assert!(!dir.path().join("agent/auth.json.lock").exists());
        // A file that is not an object is refused, not rewritten.
        std::fs::write(&path, "[1]").unwrap();
        assert!(store.modify("openai", &mut set("k3")).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1]");
    }

    #[test]
    fn a_held_lock_is_waited_for_and_a_stale_one_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let store = FileCredentialStore::new(path.clone());
        store.modify("a", &mut set("1")).unwrap();
        let lock = dir.path().join("auth.json.lock");
        std::fs::create_dir(&lock).unwrap();
        let releaser = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                std::fs::remove_dir(&lock).unwrap();
            })
        };
        let started = Instant::now();
        store.modify("b", &mut set("2")).unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "waited for the holder"
        );
        releaser.join().unwrap();
        // A lock 31 s old is an abandoned one (1.6.0's proper-lockfile: stale after 30 s).
        std::fs::create_dir(&lock).unwrap();
        let old = nix::sys::time::TimeVal::new(
            (SystemTime::now() - Duration::from_secs(31))
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64,
            0,
        );
        nix::sys::stat::utimes(&lock, &old, &old).unwrap();
        let started = Instant::now();
        store.modify("c", &mut set("3")).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"a\"") && text.contains("\"b\"") && text.contains("\"c\""));
    }
}
