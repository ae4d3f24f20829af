//! Themes: the colours of the REPL's output, from the reference's theme files
//! (`docs/themes.md` of 1.6.0; the format is its `theme.schema.json`).
//!
//! - `system` (the default, as in 1.6.0) is the terminal's own 16 colours, which the
//!   terminal renders in its own palette: what the reference falls back to when the terminal
//!   does not report its colours (pi never queries them).
//! - `dark` and `light` are the reference's built-in theme files (`themes/*.json`, kept equal
//!   to the pinned package's by a test).
//! - Any other name is a theme file the user or a trusted project brings
//!   ([`ThemeSet::load`]).
//!
//! A theme file maps the reference's colour tokens (`mdHeading`, `syntaxKeyword`, `error`, …)
//! to colours written as `#rgb`/`#rrggbb`, `oklch(L C H)`, `okhsl(H S L)`, a 256-colour index,
//! the name of an entry of `vars` (chained, never circular) or `""` (the terminal's default).
//! They are shown as 24-bit SGR on a terminal that announces truecolor, else as the nearest
//! colour of the 256-colour palette, as the reference does ([`ColorMode`]). OKHSL and OKLCH
//! are converted by the `palette` crate; OKLCH outside sRGB keeps its hue and lightness and
//! loses chroma, as the reference maps it. Only foreground tokens are used (a line REPL
//! paints no panels); background tokens are validated all the same.
//!
//! Every code a theme yields is one of the forms [`crate::support::term::output`] lets
//! through; nothing from a theme file reaches the terminal otherwise.
//!
//! Invariant: parsing does no I/O; [`ThemeSet::load`] only reads the files it is given.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use palette::convert::FromColorUnclamped;
use palette::{LinSrgb, Okhsl, Oklab, Srgb};
use serde_json::Value;

/// The name of the terminal-palette theme (reserved: a file of that name is ignored).
pub const SYSTEM: &str = "system";

/// A token's slot: foreground or background colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Foreground,
    Background,
}

/// The reference's colour tokens, in its order, with their slot and the token an optional
/// one falls back to (1.6.0's `THEME_TOKENS`).
const TOKENS: &[(&str, Slot, Option<&str>)] = &[
    ("accent", Slot::Foreground, None),
    ("border", Slot::Foreground, None),
    ("borderAccent", Slot::Foreground, None),
    ("borderMuted", Slot::Foreground, None),
    ("success", Slot::Foreground, None),
    ("error", Slot::Foreground, None),
    ("warning", Slot::Foreground, None),
    ("muted", Slot::Foreground, None),
    ("dim", Slot::Foreground, None),
    ("text", Slot::Foreground, None),
    ("thinkingText", Slot::Foreground, None),
    ("scrollbarTrack", Slot::Foreground, Some("muted")),
    ("scrollbarThumb", Slot::Foreground, Some("text")),
    ("selectedBg", Slot::Background, None),
    ("searchMatchBg", Slot::Background, Some("selectedBg")),
    ("searchMatchText", Slot::Foreground, Some("text")),
    ("userMessageBg", Slot::Background, None),
    ("userMessageText", Slot::Foreground, None),
    ("customMessageBg", Slot::Background, None),
    ("customMessageText", Slot::Foreground, None),
    ("customMessageLabel", Slot::Foreground, None),
    ("toolPendingBg", Slot::Background, None),
    ("toolSuccessBg", Slot::Background, None),
    ("toolErrorBg", Slot::Background, None),
    ("toolTitle", Slot::Foreground, None),
    ("toolOutput", Slot::Foreground, None),
    ("mdHeading", Slot::Foreground, None),
    ("mdLink", Slot::Foreground, None),
    ("mdLinkUrl", Slot::Foreground, None),
    ("mdCode", Slot::Foreground, None),
    ("mdCodeBlock", Slot::Foreground, None),
    ("mdCodeBlockBorder", Slot::Foreground, None),
    ("mdQuote", Slot::Foreground, None),
    ("mdQuoteBorder", Slot::Foreground, None),
    ("mdHr", Slot::Foreground, None),
    ("mdListBullet", Slot::Foreground, None),
    ("toolDiffAdded", Slot::Foreground, None),
    ("toolDiffRemoved", Slot::Foreground, None),
    ("toolDiffContext", Slot::Foreground, None),
    ("syntaxComment", Slot::Foreground, None),
    ("syntaxKeyword", Slot::Foreground, None),
    ("syntaxFunction", Slot::Foreground, None),
    ("syntaxVariable", Slot::Foreground, None),
    ("syntaxString", Slot::Foreground, None),
    ("syntaxNumber", Slot::Foreground, None),
    ("syntaxType", Slot::Foreground, None),
    ("syntaxOperator", Slot::Foreground, None),
    ("syntaxPunctuation", Slot::Foreground, None),
    ("thinkingOff", Slot::Foreground, None),
    ("thinkingMinimal", Slot::Foreground, None),
    ("thinkingLow", Slot::Foreground, None),
    ("thinkingMedium", Slot::Foreground, None),
    ("thinkingHigh", Slot::Foreground, None),
    ("thinkingXhigh", Slot::Foreground, None),
    ("thinkingMax", Slot::Foreground, Some("thinkingXhigh")),
    ("bashMode", Slot::Foreground, None),
];

/// The keys of a theme file's `export` object (HTML page colours).
const EXPORT_KEYS: &[&str] = &["pageBg", "cardBg", "infoBg"];

/// The terminal-palette (`system`) colour of the tokens pi's output uses: SGR parameters of
/// the 16 colours (`2`: faint), what pi showed before themes.
const SYSTEM_CODES: &[(&str, &str)] = &[
    ("accent", "36"),
    ("success", "32"),
    ("error", "31"),
    ("warning", "33"),
    ("muted", "2"),
    ("dim", "2"),
    ("thinkingText", "2"),
    ("toolOutput", "2"),
    ("mdHeading", "33"),
    ("mdLink", "34"),
    ("mdLinkUrl", "2"),
    ("mdCode", "35"),
    ("mdCodeBlock", "32"),
    ("mdCodeBlockBorder", "2"),
    ("mdQuoteBorder", "2"),
    ("mdHr", "2"),
    ("mdListBullet", "35"),
    ("syntaxComment", "2"),
    ("syntaxKeyword", "34"),
    ("syntaxFunction", "33"),
    ("syntaxString", "32"),
    ("syntaxNumber", "36"),
    ("syntaxType", "35"),
];

/// How colours other than the 16 are written: the terminal's capability, decided by `cli`
/// from the environment as the reference decides it (`COLORTERM=truecolor|24bit`, a `TERM`
/// ending in `-direct`, or a terminal known to have it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorMode {
    /// `ESC[38;2;R;G;Bm`.
    TrueColor,
    /// `ESC[38;5;Nm`, the nearest colour of the 256-colour palette.
    #[default]
    Ansi256,
}

/// A theme that cannot be used, and why (shown at start and on `/reload`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{label}: {reason}")]
pub struct ThemeError {
    /// The theme's file, or its name.
    pub label: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A colour, as the terminal is told it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    /// The terminal's default colour.
    Default,
    /// A colour of the 256-colour palette.
    Indexed(u8),
    /// An sRGB colour.
    Rgb(u8, u8, u8),
}

/// A theme ready to colour output: the SGR sequence of each foreground token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Theme {
    name: String,
    /// Token → the whole SGR sequence (`""`: the terminal's default, nothing written).
    foreground: HashMap<&'static str, String>,
}

impl Theme {
    /// The terminal's own colours.
    pub fn system() -> Self {
        let foreground = SYSTEM_CODES
            .iter()
            .map(|(token, code)| (*token, format!("\x1b[{code}m")))
            .collect();
        Self {
            name: SYSTEM.to_owned(),
            foreground,
        }
    }

    /// Parses a theme file's text (`label` names it in errors: a path or a built-in name).
    pub fn parse(label: &str, text: &str, mode: ColorMode) -> Result<Self, ThemeError> {
        let invalid = |reason: String| ThemeError {
            label: label.to_owned(),
            reason,
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let json: Value = serde_json::from_str(text).map_err(|error| ThemeError {
            label: label.to_owned(),
            reason: format!("not JSON: {error}"),
        })?;
        let Value::Object(object) = json else {
            return Err(invalid("expected an object with a \"colors\" map".into()));
        };
        for key in object.keys() {
            if !matches!(
                key.as_str(),
                "$schema" | "name" | "appearance" | "vars" | "colors" | "export"
            ) {
                return Err(invalid(format!("unknown property \"{key}\"")));
            }
        }
        let name = match object.get("name") {
            Some(Value::String(name)) if !name.is_empty() && !name.contains('/') => name.clone(),
            Some(Value::String(_)) => {
                return Err(invalid("\"name\" must be non-empty and without '/'".into()));
            }
            _ => return Err(invalid("\"name\" is required (a string)".into())),
        };
        if let Some(appearance) = object.get("appearance")
            && !matches!(appearance.as_str(), Some("dark" | "light"))
        {
            return Err(invalid(
                "\"appearance\" must be \"dark\" or \"light\"".into(),
            ));
        }
        let vars = match object.get("vars") {
            None => serde_json::Map::new(),
            Some(Value::Object(vars)) => vars.clone(),
            Some(_) => return Err(invalid("\"vars\" must be an object".into())),
        };
        let Some(Value::Object(colors)) = object.get("colors") else {
            return Err(invalid("\"colors\" is required (an object)".into()));
        };
        for key in colors.keys() {
            if !TOKENS.iter().any(|(token, _, _)| token == key) {
                return Err(invalid(format!("unknown color \"{key}\"")));
            }
        }
        let mut resolved: BTreeMap<&'static str, Color> = BTreeMap::new();
        for (token, _, fallback) in TOKENS {
            let value = match (colors.get(*token), fallback) {
                (Some(value), _) => value,
                (None, Some(_)) => continue,
                (None, None) => return Err(invalid(format!("missing color \"{token}\""))),
            };
            let color = resolve(value, &vars, &mut Vec::new())
                .map_err(|reason| invalid(format!("color \"{token}\": {reason}")))?;
            resolved.insert(token, color);
        }
        for (token, _, fallback) in TOKENS {
            if let Some(fallback) = fallback
                && !resolved.contains_key(token)
                && let Some(color) = resolved.get(fallback).copied()
            {
                resolved.insert(token, color);
            }
        }
        match object.get("export") {
            None => {}
            Some(Value::Object(export)) => {
                for (key, value) in export {
                    if !EXPORT_KEYS.contains(&key.as_str()) {
                        return Err(invalid(format!("unknown export color \"{key}\"")));
                    }
                    resolve(value, &vars, &mut Vec::new())
                        .map_err(|reason| invalid(format!("export \"{key}\": {reason}")))?;
                }
            }
            Some(_) => return Err(invalid("\"export\" must be an object".into())),
        }
        let foreground = TOKENS
            .iter()
            .filter(|(_, slot, _)| *slot == Slot::Foreground)
            .filter_map(|(token, _, _)| Some((*token, sgr(*resolved.get(token)?, mode))))
            .collect();
        Ok(Self { name, foreground })
    }

    /// The theme's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The SGR sequence that starts text of `token` (empty: the terminal's default colour).
    pub fn fg(&self, token: &str) -> &str {
        self.foreground.get(token).map_or("", String::as_str)
    }
}

/// The SGR sequence of one colour value (no `vars`) on a terminal of `mode`: what 1.6.0's
/// `foregroundAnsi(parseColor(value), mode)` gives (a test compares the two).
pub fn color_sgr(value: &Value, mode: ColorMode) -> Result<String, String> {
    Ok(sgr(
        resolve(value, &serde_json::Map::new(), &mut Vec::new())?,
        mode,
    ))
}

#[cfg(test)]
fn hex_of(value: &str) -> Result<String, String> {
    match resolve(
        &Value::String(value.into()),
        &serde_json::Map::new(),
        &mut Vec::new(),
    )? {
        Color::Rgb(r, g, b) => Ok(format!("#{r:02x}{g:02x}{b:02x}")),
        other => Err(format!("not an sRGB colour: {other:?}")),
    }
}

/// The SGR sequence of `color`.
fn sgr(color: Color, mode: ColorMode) -> String {
    match (color, mode) {
        (Color::Default, _) => String::new(),
        (Color::Indexed(index), _) => format!("\x1b[38;5;{index}m"),
        (Color::Rgb(r, g, b), ColorMode::TrueColor) => format!("\x1b[38;2;{r};{g};{b}m"),
        (Color::Rgb(r, g, b), ColorMode::Ansi256) => {
            format!("\x1b[38;5;{}m", ansi256(r, g, b))
        }
    }
}

/// A colour value of a theme file, through `vars` (`seen`: the names on the way, for
/// circular references).
fn resolve(
    value: &Value,
    vars: &serde_json::Map<String, Value>,
    seen: &mut Vec<String>,
) -> Result<Color, String> {
    match value {
        Value::Number(number) => number
            .as_u64()
            .and_then(|index| u8::try_from(index).ok())
            .map(Color::Indexed)
            .ok_or_else(|| format!("a color index must be an integer from 0 to 255: {number}")),
        Value::String(text) => {
            if text.is_empty() {
                return Ok(Color::Default);
            }
            let lower = text.to_ascii_lowercase();
            if text.starts_with('#') || lower.starts_with("oklch(") || lower.starts_with("okhsl(") {
                return parse_color(text).ok_or_else(|| format!("invalid color value: {text}"));
            }
            if seen.iter().any(|name| name == text) {
                return Err(format!("circular variable reference: {text}"));
            }
            let Some(next) = vars.get(text) else {
                return Err(format!("variable reference not found: {text}"));
            };
            seen.push(text.clone());
            resolve(next, vars, seen)
        }
        _ => Err("a color must be a string or a number".into()),
    }
}

/// `#rgb`, `#rrggbb`, `oklch(…)` or `okhsl(…)` (the reference's grammar: numbers with an
/// optional `%`, hue with an optional `deg`, spaces between).
fn parse_color(text: &str) -> Option<Color> {
    if let Some(hex) = text.strip_prefix('#') {
        let digits: Vec<u8> = hex
            .chars()
            .map(|c| c.to_digit(16).and_then(|d| u8::try_from(d).ok()))
            .collect::<Option<_>>()?;
        return match digits.as_slice() {
            [r, g, b] => Some(Color::Rgb(r * 17, g * 17, b * 17)),
            [r1, r2, g1, g2, b1, b2] => Some(Color::Rgb(r1 * 16 + r2, g1 * 16 + g2, b1 * 16 + b2)),
            _ => None,
        };
    }
    let lower = text.to_ascii_lowercase();
    let (function, rest) = lower.split_once('(')?;
    let inner = rest.strip_suffix(')')?;
    let parts: Vec<&str> = inner.split_whitespace().collect();
    let [first, second, third] = parts.as_slice() else {
        return None;
    };
    match function {
        "oklch" => {
            let (lightness, percent) = number(first, true)?;
            let lightness = if percent {
                lightness / 100.0
            } else {
                lightness
            };
            let (chroma, _) = number(second, false)?;
            let (hue, _) = number(third.strip_suffix("deg").unwrap_or(third), false)?;
            if !(0.0..=1.0).contains(&lightness) || chroma < 0.0 {
                return None;
            }
            Some(oklch_to_rgb(lightness, chroma, hue))
        }
        "okhsl" => {
            let (hue, _) = number(first.strip_suffix("deg").unwrap_or(first), false)?;
            let (saturation, percent) = number(second, true)?;
            let saturation = if percent {
                saturation / 100.0
            } else {
                saturation
            };
            let (lightness, percent) = number(third, true)?;
            let lightness = if percent {
                lightness / 100.0
            } else {
                lightness
            };
            if !(0.0..=1.0).contains(&saturation) || !(0.0..=1.0).contains(&lightness) {
                return None;
            }
            let hue = hue.rem_euclid(360.0);
            let srgb = Srgb::from_color_unclamped(Okhsl::new(hue, saturation, lightness));
            Some(rgb_of(srgb))
        }
        _ => None,
    }
}

/// A number of a colour function, with whether it had a `%` (allowed only where `percent`).
fn number(text: &str, percent: bool) -> Option<(f64, bool)> {
    let (digits, had) = match text.strip_suffix('%') {
        Some(digits) if percent => (digits, true),
        Some(_) => return None,
        None => (text, false),
    };
    let value: f64 = digits.parse().ok()?;
    value.is_finite().then_some((value, had))
}

/// sRGB (0–1 per channel) to 8-bit channels: clamped, then rounded half up as JavaScript's
/// `Math.round` does.
fn rgb_of(srgb: Srgb<f64>) -> Color {
    let channel = |value: f64| (value.clamp(0.0, 1.0) * 255.0 + 0.5).floor() as u8;
    Color::Rgb(channel(srgb.red), channel(srgb.green), channel(srgb.blue))
}

/// OKLCH to sRGB: in gamut as it is, else the chroma is bisected (20 steps) down to the
/// largest that fits, hue and lightness kept.
fn oklch_to_rgb(lightness: f64, chroma: f64, hue: f64) -> Color {
    let radians = hue.to_radians();
    let (sin, cos) = radians.sin_cos();
    let at = |c: f64| LinSrgb::from_color_unclamped(Oklab::new(lightness, c * cos, c * sin));
    let fits = |linear: &LinSrgb<f64>| {
        [linear.red, linear.green, linear.blue]
            .iter()
            .all(|channel| (-1e-7..=1.0 + 1e-7).contains(channel))
    };
    let direct = at(chroma);
    let linear = if fits(&direct) {
        direct
    } else {
        let mut best = at(0.0);
        let (mut low, mut high) = (0.0, chroma);
        for _ in 0..20 {
            let middle = (low + high) / 2.0;
            let candidate = at(middle);
            if fits(&candidate) {
                low = middle;
                best = candidate;
            } else {
                high = middle;
            }
        }
        best
    };
    let clamp = LinSrgb::new(
        linear.red.clamp(0.0, 1.0),
        linear.green.clamp(0.0, 1.0),
        linear.blue.clamp(0.0, 1.0),
    );
    rgb_of(Srgb::from_linear(clamp))
}

/// The nearest colour of the 256-colour palette: the 6×6×6 cube, or the grey ramp for
/// near-greys that it matches better (the reference's approximation).
fn ansi256(r: u8, g: u8, b: u8) -> u8 {
    const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let closest = |values: &[u8], target: f64| -> usize {
        let mut best = 0;
        let mut distance = f64::INFINITY;
        for (index, value) in values.iter().enumerate() {
            let d = (target - f64::from(*value)).abs();
            if d < distance {
                best = index;
                distance = d;
            }
        }
        best
    };
    let (rf, gf, bf) = (f64::from(r), f64::from(g), f64::from(b));
    let (ri, gi, bi) = (closest(&CUBE, rf), closest(&CUBE, gf), closest(&CUBE, bf));
    let cube = (
        f64::from(CUBE[ri]),
        f64::from(CUBE[gi]),
        f64::from(CUBE[bi]),
    );
    // Every index is < 6, so the cube index is at most 231.
    let cube_index = (16 + 36 * ri + 6 * gi + bi) as u8;
    let greys: Vec<u8> = (0..24u8).map(|i| 8 + i * 10).collect();
    let grey = (0.299 * rf + 0.587 * gf + 0.114 * bf + 0.5).floor();
    let grey_offset = closest(&greys, grey);
    let grey_value = f64::from(greys[grey_offset]);
    let distance = |(r2, g2, b2): (f64, f64, f64)| {
        (rf - r2).powi(2) * 0.299 + (gf - g2).powi(2) * 0.587 + (bf - b2).powi(2) * 0.114
    };
    let spread = r.max(g).max(b) - r.min(g).min(b);
    if spread < 10 && distance((grey_value, grey_value, grey_value)) < distance(cube) {
        // At most 23.
        return 232 + grey_offset as u8;
    }
    cube_index
}

/// The built-in theme files: the reference's `dark.json` and `light.json`.
const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("themes/dark.json")),
    ("light", include_str!("themes/light.json")),
];

/// The themes one can choose: `system`, the built-ins and the loaded files.
#[derive(Clone, Debug, Default)]
pub struct ThemeSet {
    /// Name → (source path, text) of the themes loaded from files.
    files: BTreeMap<String, (PathBuf, String)>,
}

impl ThemeSet {
    /// Loads the theme files of `sources` (files, or directories whose `*.json` files are
    /// themes), in order: a later theme of a name already taken is a collision and skipped,
    /// as are invalid files and the reserved and built-in names. Returns the set and the
    /// problems found, one line each.
    pub fn load(sources: &[PathBuf]) -> (Self, Vec<String>) {
        let mut set = Self::default();
        let mut problems = Vec::new();
        for source in sources {
            let mut files = Vec::new();
            if source.is_dir() {
                match std::fs::read_dir(source) {
                    Ok(entries) => {
                        let mut paths: Vec<PathBuf> = entries
                            .filter_map(Result::ok)
                            .map(|entry| entry.path())
                            .filter(|path| {
                                path.extension().is_some_and(|ext| ext == "json") && path.is_file()
                            })
                            .collect();
                        paths.sort();
                        files.extend(paths);
                    }
                    Err(error) => problems.push(format!("{}: {error}", source.display())),
                }
            } else if source.exists() {
                files.push(source.clone());
            } else {
                problems.push(format!(
                    "{}: no such theme file or directory",
                    source.display()
                ));
            }
            for path in files {
                match set.add_file(&path) {
                    Ok(()) => {}
                    Err(problem) => problems.push(problem),
                }
            }
        }
        (set, problems)
    }

    fn add_file(&mut self, path: &Path) -> Result<(), String> {
        let label = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| {
            ThemeError {
                label: label.clone(),
                reason: error.to_string(),
            }
            .to_string()
        })?;
        let theme = Theme::parse(&label, &text, ColorMode::Ansi256).map_err(|e| e.to_string())?;
        let name = theme.name().to_owned();
        if name == SYSTEM || BUILTIN.iter().any(|(builtin, _)| *builtin == name) {
            return Err(format!(
                "{label}: the theme name \"{name}\" is reserved for the built-in theme"
            ));
        }
        if let Some((first, _)) = self.files.get(&name) {
            return Err(format!(
                "{label}: theme \"{name}\" is already loaded from {}",
                first.display()
            ));
        }
        self.files.insert(name, (path.to_path_buf(), text));
        Ok(())
    }

    /// The names one can choose, `system` first.
    pub fn names(&self) -> Vec<String> {
        let mut names = vec![SYSTEM.to_owned()];
        names.extend(BUILTIN.iter().map(|(name, _)| (*name).to_owned()));
        names.extend(self.files.keys().cloned());
        names
    }

    /// The theme of `name` for a terminal of `mode`.
    pub fn theme(&self, name: &str, mode: ColorMode) -> Result<Theme, ThemeError> {
        if name == SYSTEM {
            return Ok(Theme::system());
        }
        if let Some((_, text)) = BUILTIN.iter().find(|(builtin, _)| *builtin == name) {
            return Theme::parse(name, text, mode);
        }
        match self.files.get(name) {
            Some((path, text)) => Theme::parse(&path.display().to_string(), text, mode),
            None => Err(ThemeError {
                label: name.to_owned(),
                reason: format!("no such theme (available: {})", self.names().join(", ")),
            }),
        }
    }
}

/// The theme a `theme` setting (or `--use-theme`) names: `light/dark` picks by the terminal's
/// appearance (`light`: whether its background is light), else the name itself.
pub fn choose(setting: &str, light: bool) -> Option<&str> {
    match setting.split_once('/') {
        Some((light_theme, dark_theme)) => {
            let (light_theme, dark_theme) = (light_theme.trim(), dark_theme.trim());
            if light_theme.is_empty() || dark_theme.is_empty() || dark_theme.contains('/') {
                return None;
            }
            Some(if light { light_theme } else { dark_theme })
        }
        None if setting.trim().is_empty() => None,
        None => Some(setting.trim()),
    }
}

/// What the REPL's theme is chosen from, resolved by `cli` (files, setting, environment).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThemeConfig {
    /// Theme files and directories in precedence order: `--theme` paths (even with
    /// `--no-themes`), then the `themes` settings entries and `.pi/themes` of a trusted
    /// project and `<agent dir>/themes`.
    pub sources: Vec<PathBuf>,
    /// `--use-theme`, else the `theme` setting (`None`: `system`).
    pub setting: Option<String>,
    /// Whether the terminal's background is light (`COLORFGBG`; unknown: dark), for a
    /// `light/dark` setting.
    pub light: bool,
    /// The terminal's colour capability.
    pub mode: ColorMode,
}

impl ThemeConfig {
    /// Reads the theme files and returns them with the chosen theme (`system` when the
    /// setting names no usable theme) and the problems to show, one line each.
    pub fn load(&self) -> (ThemeSet, Theme, Vec<String>) {
        let (set, mut problems) = ThemeSet::load(&self.sources);
        let theme = match self.setting.as_deref() {
            None => Theme::system(),
            Some(setting) => match choose(setting, self.light) {
                None => {
                    problems.push(format!(
                        "theme \"{setting}\": not a theme name or a light/dark pair; using system"
                    ));
                    Theme::system()
                }
                Some(name) => set.theme(name, self.mode).unwrap_or_else(|error| {
                    problems.push(format!("{error}; using system"));
                    Theme::system()
                }),
            },
        };
        (set, theme, problems)
    }
}

/// Whether `COLORFGBG` (`fg;bg` or `fg;xpm;bg`) names a light background: indexes 7 and
/// 9–15 are light, 0–6 and 8 dark, as the reference (and Vim) classify them; `None` without
/// a usable index.
pub fn light_background(colorfgbg: &str) -> Option<bool> {
    let background = colorfgbg.rsplit(';').next()?.trim();
    if background.is_empty() || background.len() > 2 {
        return None;
    }
    let index: u8 = background.parse().ok()?;
    (index <= 15).then_some(!(index <= 6 || index == 8))
}

impl fmt::Display for ColorMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ColorMode::TrueColor => "truecolor",
            ColorMode::Ansi256 => "256color",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_themes_parse_and_colour_every_token_pi_uses() {
        for (name, _) in BUILTIN {
            for mode in [ColorMode::TrueColor, ColorMode::Ansi256] {
                let theme = ThemeSet::default().theme(name, mode).unwrap();
                assert_eq!(theme.name(), *name);
                for (token, _) in SYSTEM_CODES {
                    let code = theme.fg(token);
                    assert!(code.starts_with("\x1b[38;"), "{name} {token}: {code:?}");
                    assert!(
                        crate::support::term::output(code) == *code,
                        "{code:?} let through"
                    );
                }
            }
        }
        let dark = ThemeSet::default()
            .theme("dark", ColorMode::TrueColor)
            .unwrap();
        // `okhsl(232 54% 67%)`, 1.6.0's `blue`, as its colorToHex gives it (#69add0).
        assert_eq!(dark.fg("syntaxKeyword"), "\x1b[38;2;105;173;208m");
    }

    #[test]
    fn colour_forms_vars_and_fallbacks_are_resolved_as_the_reference_does() {
        assert_eq!(hex_of("#0af").unwrap(), "#00aaff");
        assert_eq!(hex_of("#00AAFF").unwrap(), "#00aaff");
        assert_eq!(hex_of("okhsl(0 0% 100%)").unwrap(), "#ffffff");
        assert_eq!(hex_of("okhsl(0deg 0 0)").unwrap(), "#000000");
        // Out of gamut: the chroma shrinks to white.
        assert_eq!(hex_of("oklch(100% 0.3 150)").unwrap(), "#ffffff");
        assert!(hex_of("okhsl(10 120% 50%)").is_err());
        assert!(hex_of("#12345").is_err());
        assert_eq!(ansi256(0, 0, 0), 16);
        assert_eq!(ansi256(255, 255, 255), 231);
        assert_eq!(ansi256(128, 128, 128), 244);

        let mut colors = serde_json::Map::new();
        for (token, _, fallback) in TOKENS {
            if fallback.is_none() {
                colors.insert((*token).into(), Value::String("base".into()));
            }
        }
        colors.insert("text".into(), Value::from(""));
        colors.insert("error".into(), Value::from(196));
        let theme = |vars: Value, colors: &serde_json::Map<String, Value>| {
            let json = serde_json::json!({"name": "t", "vars": vars, "colors": colors});
            Theme::parse("t.json", &json.to_string(), ColorMode::TrueColor)
        };
        let ok = theme(
            serde_json::json!({"base": "mid", "mid": "#102030"}),
            &colors,
        )
        .unwrap();
        assert_eq!(ok.fg("accent"), "\x1b[38;2;16;32;48m");
        assert_eq!(ok.fg("error"), "\x1b[38;5;196m");
        assert_eq!(ok.fg("text"), "");
        // searchMatchText falls back to text.
        assert_eq!(ok.fg("searchMatchText"), "");
        let circular = theme(serde_json::json!({"base": "mid", "mid": "base"}), &colors);
        assert!(
            circular.unwrap_err().to_string().contains("circular"),
            "circular vars refused"
        );
        let missing = theme(serde_json::json!({}), &colors).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("variable reference not found: base")
        );
        let mut unknown = colors.clone();
        unknown.insert("sparkle".into(), Value::from(1));
        let unknown = theme(serde_json::json!({"base": 1}), &unknown).unwrap_err();
        assert!(unknown.to_string().contains("unknown color \"sparkle\""));
        let mut short = colors.clone();
        short.remove("mdHeading");
        let short = theme(serde_json::json!({"base": 1}), &short).unwrap_err();
        assert!(short.to_string().contains("missing color \"mdHeading\""));
        let index = Theme::parse(
            "x",
            r#"{"name":"x","colors":{"accent":256}}"#,
            ColorMode::TrueColor,
        );
        assert!(index.unwrap_err().to_string().contains("0 to 255"));
    }

    #[test]
    fn an_automatic_setting_picks_by_the_terminal_s_appearance() {
        assert_eq!(choose("light/dark", true), Some("light"));
        assert_eq!(choose("light / mine", false), Some("mine"));
        assert_eq!(choose("a/b/c", false), None);
        assert_eq!(choose("/dark", false), None);
        assert_eq!(choose("dark", true), Some("dark"));
        assert_eq!(choose(" ", true), None);
        assert_eq!(light_background("15;0"), Some(false));
        assert_eq!(light_background("0;default;15"), Some(true));
        assert_eq!(light_background("0;8"), Some(false));
        assert_eq!(light_background("0;7"), Some(true));
        assert_eq!(light_background("0;16"), None);
        assert_eq!(light_background("0;default"), None);
    }
}
