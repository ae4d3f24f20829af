//! Themes against the reference: the built-in theme files are 1.6.0's, and every colour form
//! converts to the SGR sequence 1.6.0's `pi-tui` writes for it, in truecolor and 256 colours.

use std::io::Write as _;
use std::process::{Command, Stdio};

use pi::modes::theme::{ColorMode, color_sgr};
use serde_json::{Value, json};

use super::interop16::{interop16_dir, node22};

fn package_theme(name: &str) -> String {
    let path = interop16_dir().join(format!(
        "node_modules/@earendil-works/pi-coding-agent/dist/modes/interactive/theme/{name}.json"
    ));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_built_in_themes_are_the_reference_s_files() {
    for name in ["dark", "light"] {
        let ours = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("src/modes/themes/{name}.json")),
        )
        .unwrap();
        assert_eq!(
            ours,
            package_theme(name),
            "src/modes/themes/{name}.json differs from 1.6.0's"
        );
    }
}

/// A small seeded generator (xorshift64*), so the sample is the same on every run.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn tenths(&mut self, max: u64) -> String {
        let v = self.below(max * 10 + 1);
        format!("{}.{}", v / 10, v % 10)
    }
}

#[test]
fn every_colour_form_becomes_the_sgr_the_reference_writes() {
    let mut values: Vec<Value> = Vec::new();
    for name in ["dark", "light"] {
        let theme: Value = serde_json::from_str(&package_theme(name)).unwrap();
        for section in ["vars", "colors", "export"] {
            for value in theme[section].as_object().unwrap().values() {
                let text = value.as_str().unwrap_or("");
                if text.starts_with("ok") || text.starts_with('#') || value.is_number() {
                    values.push(value.clone());
                }
            }
        }
    }
    let mut rng = Seeded(0x5eed_7e11_0c01_0a55);
    for _ in 0..300 {
        values.push(json!(format!(
            "okhsl({} {}% {}%)",
            rng.tenths(360),
            rng.tenths(100),
            rng.tenths(100)
        )));
    }
    for _ in 0..200 {
        let chroma = rng.below(401) as f64 / 1000.0;
        values.push(json!(format!(
            "oklch({}% {chroma} {})",
            rng.tenths(100),
            rng.tenths(360)
        )));
    }
    for _ in 0..100 {
        values.push(json!(format!("#{:06x}", rng.below(0x100_0000))));
    }
    for _ in 0..20 {
        values.push(json!(format!("#{:03x}", rng.below(0x1000))));
        values.push(json!(rng.below(256)));
    }
    values.extend([
        json!("okhsl(0 0% 100%)"),
        json!("oklch(100% 0.3 150)"),
        json!("oklch(0% 0 0)"),
    ]);

    let script = r#"
        const colors = await import(process.argv[1]);
        let input = "";
        for await (const chunk of process.stdin) input += chunk;
        const out = JSON.parse(input).map((v) => {
            const color = colors.parseColor(v);
            return [colors.foregroundAnsi(color, "truecolor"), colors.foregroundAnsi(color, "256color")];
        });
        process.stdout.write(JSON.stringify(out));
    "#;
    let colors_js = interop16_dir().join("node_modules/@earendil-works/pi-tui/dist/colors.js");
    let mut child = Command::new(node22())
        .args(["--input-type=module", "-e", script])
        .arg(format!("file://{}", colors_js.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&values).unwrap().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "node failed");
    let theirs: Vec<(String, String)> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(theirs.len(), values.len());
    let mut differences = Vec::new();
    for (value, (truecolor, ansi256)) in values.iter().zip(&theirs) {
        let ours = (
            color_sgr(value, ColorMode::TrueColor).unwrap(),
            color_sgr(value, ColorMode::Ansi256).unwrap(),
        );
        if (&ours.0, &ours.1) != (truecolor, ansi256) {
            differences.push(format!(
                "{value}: ours {ours:?}, 1.6.0 ({truecolor:?}, {ansi256:?})"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} colours differ:\n{}",
        differences.len(),
        values.len(),
        differences.join("\n")
    );
}
