//! Finding out-of-process extensions (`docs/extensions.md`, "Where pi looks").
//!
//! Sources, in load order (the reference's precedence): `-e PATH` (honoured even with
//! `--no-extensions`), the project settings key `executableExtensions`
//! (`<cwd>/.pi/settings.json`, paths relative to `<cwd>/.pi`), the directory
//! `<cwd>/.pi/extensions/`, the user settings key (`<agent dir>/settings.json`, relative to the
//! agent dir), and `<agent dir>/extensions/`. A path may start with `~/`. The two project
//! sources count only for a trusted project (`session::trust`).
//!
//! An extension is an executable file (any run bit set) or a directory holding an executable
//! file named `extension`. The reference keeps its TypeScript extensions in the same places —
//! `*.ts`/`*.js` files (executable or not) and directories with `index.ts`, `index.js` or a
//! `package.json` with `pi.extensions` — and those are found in the same order, marked
//! `node`: pi's Node host (`node_host`) loads them.
//! In the directories, dotfiles, `node_modules` and other files are ignored; entries load in
//! name order. A path found twice loads once.
//!
//! Invariant: reads the file system only; never starts anything.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where an extension was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtensionOrigin {
    /// `-e PATH`.
    CommandLine,
    /// `executableExtensions` in the project settings.
    ProjectSettings,
    /// `<cwd>/.pi/extensions/`.
    ProjectDir,
    /// `executableExtensions` in the user settings.
    UserSettings,
    /// `<agent dir>/extensions/`.
    UserDir,
}

/// An extension process to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutableExtension {
    /// The program to run (the file, or the directory's `extension`); for a reference
    /// extension (`node`), the `.ts`/`.js` file or package directory the Node host loads.
    pub program: PathBuf,
    /// A TypeScript/JavaScript extension of the reference, run by pi's Node host
    /// (`node_host`) instead of being executed.
    pub node: bool,
    /// The path reported in errors (`extensionPath`): the file or directory found.
    pub display: String,
    /// Where it was found.
    pub origin: ExtensionOrigin,
}

/// What to look at.
#[derive(Clone, Debug)]
pub struct DiscoveryInput<'a> {
    /// The working directory.
    pub cwd: &'a Path,
    /// The agent directory.
    pub agent_dir: &'a Path,
    /// The home directory, for `~/`.
    pub home: Option<&'a Path>,
    /// `-e` values.
    pub cli_paths: &'a [String],
    /// `executableExtensions` of `<cwd>/.pi/settings.json`.
    pub project_settings: &'a [String],
    /// `executableExtensions` of `<agent dir>/settings.json`.
    pub user_settings: &'a [String],
    /// False with `--no-extensions` (settings and directories are then ignored).
    pub discover: bool,
    /// Whether the project is trusted (`session::trust`): otherwise its `executableExtensions`
    /// and `<cwd>/.pi/extensions/` are left alone — never run, not even listed.
    pub project_trusted: bool,
}

/// What discovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovered {
    /// The extensions to start, in load order.
    pub executables: Vec<ExecutableExtension>,
    /// Paths that were named explicitly but cannot be used (one line each).
    pub problems: Vec<String>,
}

/// What a path is.
enum Kind {
    Executable(PathBuf),
    Reference,
    Nothing,
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn is_script_of_the_reference(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|ext| ext.to_str()),
        Some("ts" | "js")
    )
}

fn is_reference_dir(dir: &Path) -> bool {
    if dir.join("index.ts").is_file() || dir.join("index.js").is_file() {
        return true;
    }
    let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|package| package.get("pi")?.get("extensions").cloned())
        .is_some()
}

fn classify(path: &Path) -> Kind {
    let Ok(meta) = std::fs::metadata(path) else {
        return Kind::Nothing;
    };
    if meta.is_dir() {
        if is_reference_dir(path) {
            return Kind::Reference;
        }
        let entry = path.join("extension");
        return if is_executable(&entry) {
            Kind::Executable(entry)
        } else {
            Kind::Nothing
        };
    }
    if is_script_of_the_reference(path) {
        return Kind::Reference;
    }
    if is_executable(path) {
        Kind::Executable(path.to_path_buf())
    } else {
        Kind::Nothing
    }
}

fn expand(value: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    let path = match (value.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if value == "~" => home.map_or_else(|| PathBuf::from(value), Path::to_path_buf),
        _ => PathBuf::from(value),
    };
    let joined = if path.is_absolute() {
        path
    } else {
        base.join(path)
    };
    normalize(&joined)
}

/// Removes `.` and resolves `..` lexically (the path need not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

struct Collector {
    found: Discovered,
    seen: HashSet<PathBuf>,
}

impl Collector {
    fn add(&mut self, path: &Path, origin: ExtensionOrigin, explicit: bool) {
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if !self.seen.insert(key) {
            return;
        }
        let display = path.display().to_string();
        match classify(path) {
            Kind::Executable(program) => self.found.executables.push(ExecutableExtension {
                program,
                node: false,
                display,
                origin,
            }),
            Kind::Reference => self.found.executables.push(ExecutableExtension {
                program: path.to_path_buf(),
                node: true,
                display,
                origin,
            }),
            Kind::Nothing if explicit => self.found.problems.push(if path.exists() {
                format!(
                    "{display}: not an extension pi can run (an executable file, or a directory with an executable `extension`)"
                )
            } else {
                format!("{display}: extension not found")
            }),
            Kind::Nothing => {}
        }
    }

    fn scan(&mut self, dir: &Path, origin: ExtensionOrigin) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| !name.starts_with('.') && name != "node_modules")
            })
            .collect();
        paths.sort();
        for path in paths {
            self.add(&path, origin, false);
        }
    }
}

/// The `executableExtensions` entries of a parsed `settings.json` (non-strings ignored).
pub fn executable_entries(settings: &serde_json::Value) -> Vec<String> {
    settings
        .get("executableExtensions")
        .and_then(serde_json::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Finds the extensions of [`DiscoveryInput`] (see the module docs).
pub fn discover(input: &DiscoveryInput<'_>) -> Discovered {
    let mut collector = Collector {
        found: Discovered::default(),
        seen: HashSet::new(),
    };
    for value in input.cli_paths {
        let path = expand(value, input.cwd, input.home);
        collector.add(&path, ExtensionOrigin::CommandLine, true);
    }
    if input.discover {
        if input.project_trusted {
            let project_base = input.cwd.join(".pi");
            for value in input.project_settings {
                let path = expand(value, &project_base, input.home);
                collector.add(&path, ExtensionOrigin::ProjectSettings, true);
            }
            collector.scan(
                &project_base.join("extensions"),
                ExtensionOrigin::ProjectDir,
            );
        }
        for value in input.user_settings {
            let path = expand(value, input.agent_dir, input.home);
            collector.add(&path, ExtensionOrigin::UserSettings, true);
        }
        collector.scan(
            &input.agent_dir.join("extensions"),
            ExtensionOrigin::UserDir,
        );
    }
    collector.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str, mode: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn executables_load_in_precedence_order_and_reference_extensions_are_listed_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("work");
        let agent = dir.path().join("agent");
        let project = cwd.join(".pi/extensions");
        write(&project.join("b-guard.py"), "#!/bin/sh\n", 0o755);
        write(&project.join("a-tool"), "#!/bin/sh\n", 0o755);
        write(&project.join("notes.md"), "not an extension", 0o644);
        write(&project.join(".hidden"), "#!/bin/sh\n", 0o755);
        write(&project.join("ref.ts"), "export default () => {}", 0o755);
        write(
            &project.join("pkg/index.ts"),
            "export default () => {}",
            0o644,
        );
        write(&project.join("native/extension"), "#!/bin/sh\n", 0o755);
        write(
            &project.join("node_modules/x/extension"),
            "#!/bin/sh\n",
            0o755,
        );
        write(
            &agent.join("extensions/npm-ext/package.json"),
            r#"{"pi":{"extensions":["./src/index.ts"]}}"#,
            0o644,
        );
        write(&agent.join("extensions/user-tool"), "#!/bin/sh\n", 0o700);
        write(&agent.join("tools/from-settings"), "#!/bin/sh\n", 0o755);
        write(&dir.path().join("cli-ext"), "#!/bin/sh\n", 0o755);
        let cli = vec![
            "../cli-ext".to_owned(),
            "missing-ext".to_owned(),
            ".pi/extensions/a-tool".to_owned(),
        ];
        let user = vec!["tools/from-settings".to_owned()];
        let found = discover(&DiscoveryInput {
            cwd: &cwd,
            agent_dir: &agent,
            home: None,
            cli_paths: &cli,
            project_settings: &[],
            user_settings: &user,
            discover: true,
            project_trusted: true,
        });
        let names: Vec<(String, ExtensionOrigin)> = found
            .executables
            .iter()
            .map(|ext| {
                (
                    ext.program
                        .strip_prefix(dir.path())
                        .unwrap()
                        .display()
                        .to_string(),
                    ext.origin,
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("cli-ext".to_owned(), ExtensionOrigin::CommandLine),
                (
                    "work/.pi/extensions/a-tool".to_owned(),
                    ExtensionOrigin::CommandLine
                ),
                (
                    "work/.pi/extensions/b-guard.py".to_owned(),
                    ExtensionOrigin::ProjectDir
                ),
                (
                    "work/.pi/extensions/native/extension".to_owned(),
                    ExtensionOrigin::ProjectDir
                ),
                (
                    "work/.pi/extensions/pkg".to_owned(),
                    ExtensionOrigin::ProjectDir
                ),
                (
                    "work/.pi/extensions/ref.ts".to_owned(),
                    ExtensionOrigin::ProjectDir
                ),
                (
                    "agent/tools/from-settings".to_owned(),
                    ExtensionOrigin::UserSettings
                ),
                (
                    "agent/extensions/npm-ext".to_owned(),
                    ExtensionOrigin::UserDir
                ),
                (
                    "agent/extensions/user-tool".to_owned(),
                    ExtensionOrigin::UserDir
                ),
            ]
        );
        // The reference's TypeScript/JavaScript extensions keep their place, run by the Node host.
        let node: Vec<bool> = found.executables.iter().map(|ext| ext.node).collect();
        assert_eq!(
            node,
            [false, false, false, false, true, true, false, true, false]
        );
        assert_eq!(found.problems.len(), 1);
        assert!(found.problems[0].ends_with("missing-ext: extension not found"));
    }

    #[test]
    fn no_extensions_keeps_only_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join(".pi/extensions/a"), "#!/bin/sh\n", 0o755);
        write(&dir.path().join("b"), "#!/bin/sh\n", 0o755);
        let found = discover(&DiscoveryInput {
            cwd: dir.path(),
            agent_dir: &dir.path().join("agent"),
            home: None,
            cli_paths: &["b".to_owned()],
            project_settings: &[],
            user_settings: &[],
            discover: false,
            project_trusted: true,
        });
        assert_eq!(found.executables.len(), 1);
        assert!(found.executables[0].program.ends_with("b"));
        // An untrusted project's extensions and settings entries are not even looked at.
        let found = discover(&DiscoveryInput {
            cwd: dir.path(),
            agent_dir: &dir.path().join("agent"),
            home: None,
            cli_paths: &[],
            project_settings: &["b".to_owned()],
            user_settings: &[],
            discover: true,
            project_trusted: false,
        });
        assert_eq!(found, Discovered::default());
    }
}
