//! The README's quickstart does real work without an API key: the example sessions shipped in
//! `examples/sessions/` import cleanly into a fresh database and the search finds them.

use std::path::PathBuf;

use crate::common::TestEnv;

#[test]
fn the_example_sessions_import_and_search_as_the_readme_shows() {
    let env = TestEnv::new();
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/sessions");
    let db = env.dir.path().join("demo.db");
    let db_arg = db.display().to_string();
    let examples_arg = examples.display().to_string();
    let output = env
        .pi()
        .args(["--db", &db_arg, "import", &examples_arg])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout
            .lines()
            .filter(|line| line.starts_with("imported"))
            .count(),
        7,
        "{stdout}"
    );
    assert!(
        !stdout.contains("skipped"),
        "the examples are clean: {stdout}"
    );
    let output = env
        .pi()
        .args(["--db", &db_arg, "sessions", "search", "--all", "checkout"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("What does the **checkout** module do?"),
        "{stdout}"
    );
}
