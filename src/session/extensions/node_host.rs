//! The Node host: how pi runs the reference's TypeScript/JavaScript extensions unchanged
//! (`docs/extensions.md`, "The reference's extensions").
//!
//! The host is a JavaScript program shipped inside the pi binary (`node_host/host.mjs`)
//! together with a pinned copy of the loader the reference uses, jiti 2.7.0 (MIT,
//! `node_host/jiti/`). On first use the files are written to
//! `<agent dir>/cache/node-host/<pi version>/` (rewritten when their content differs) and the
//! user's `node` (found on the `PATH` of pi's environment, 18 or newer) runs
//! `host.mjs <extension path>`: one process per reference extension, which speaks pi's
//! process protocol — from pi's point of view it is one more executable extension.
//!
//! Invariant: never panics; every failure is one line naming what is missing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The oldest Node major version the host supports (jiti 2 needs 18).
pub const MIN_NODE_MAJOR: u64 = 18;

const FILES: &[(&str, &[u8])] = &[
    ("host.mjs", include_bytes!("node_host/host.mjs")),
    (
        "jiti/package.json",
        include_bytes!("node_host/jiti/package.json"),
    ),
    ("jiti/LICENSE", include_bytes!("node_host/jiti/LICENSE")),
    (
        "jiti/lib/jiti.cjs",
        include_bytes!("node_host/jiti/lib/jiti.cjs"),
    ),
    (
        "jiti/dist/jiti.cjs",
        include_bytes!("node_host/jiti/dist/jiti.cjs"),
    ),
    (
        "jiti/dist/babel.cjs",
        include_bytes!("node_host/jiti/dist/babel.cjs"),
    ),
];

/// How to start the host for one extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeHost {
    /// The `node` executable.
    pub node: PathBuf,
    /// The host script.
    pub script: PathBuf,
}

impl NodeHost {
    /// The arguments that make the host load `extension`.
    pub fn args(&self, extension: &Path) -> Vec<OsString> {
        vec![
            self.script.clone().into_os_string(),
            extension.as_os_str().to_owned(),
        ]
    }
}

/// Finds `node` on `path` (a `PATH` value).
pub fn find_node(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .map(|dir| dir.join("node"))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// Parses `v20.20.2` into its major version.
pub fn node_major(version: &str) -> Option<u64> {
    version
        .trim()
        .strip_prefix('v')?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// Writes the host files under `cache_dir/node-host/<version>/` (skipping identical ones).
pub fn install(cache_dir: &Path) -> Result<PathBuf, String> {
    let root = cache_dir.join("node-host").join(env!("CARGO_PKG_VERSION"));
    for (name, bytes) in FILES {
        let target = root.join(name);
        if std::fs::read(&target).is_ok_and(|current| current == *bytes) {
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
        }
        // Written beside and renamed, so that a concurrent pi never runs half a file.
        let temp = target.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&temp, bytes)
            .and_then(|()| std::fs::rename(&temp, &target))
            .map_err(|error| format!("cannot write {}: {error}", target.display()))?;
    }
    Ok(root.join("host.mjs"))
}

/// Finds a usable `node` and installs the host; the error names what is missing.
pub async fn prepare(env: &[(OsString, OsString)], cache_dir: &Path) -> Result<NodeHost, String> {
    let path = env
        .iter()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| value.as_os_str());
    let node = find_node(path).ok_or_else(|| {
        format!(
            "TypeScript/JavaScript extensions need Node.js {MIN_NODE_MAJOR} or newer, and no `node` was found on PATH"
        )
    })?;
    let output = tokio::process::Command::new(&node)
        .arg("--version")
        .env_clear()
        .envs(env.iter().map(|(key, value)| (key, value)))
        .output()
        .await
        .map_err(|error| format!("cannot run {}: {error}", node.display()))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    match node_major(&version) {
        Some(major) if major >= MIN_NODE_MAJOR => {}
        _ => {
            return Err(format!(
                "TypeScript/JavaScript extensions need Node.js {MIN_NODE_MAJOR} or newer; {} is {}",
                node.display(),
                if version.is_empty() {
                    "of an unknown version"
                } else {
                    &version
                }
            ));
        }
    }
    let script = install(cache_dir)?;
    Ok(NodeHost { node, script })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_the_host_is_installed_once() {
        assert_eq!(node_major("v20.20.2\n"), Some(20));
        assert_eq!(node_major("garbage"), None);
        let dir = tempfile::tempdir().unwrap();
        let script = install(dir.path()).unwrap();
        assert!(script.ends_with(format!("node-host/{}/host.mjs", env!("CARGO_PKG_VERSION"))));
        let babel = script.parent().unwrap().join("jiti/dist/babel.cjs");
        assert!(babel.is_file());
        std::fs::write(&babel, "changed").unwrap();
        install(dir.path()).unwrap();
        assert_ne!(std::fs::read(&babel).unwrap(), b"changed");
    }

    #[test]
    fn node_is_found_on_path_only() {
        assert_eq!(find_node(Some(std::ffi::OsStr::new("/nonexistent"))), None);
        assert_eq!(find_node(None), None);
    }
}
