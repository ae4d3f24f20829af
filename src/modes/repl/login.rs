//! `/login [provider]` and `/logout [provider]`: the sign-in flows of `modes::login` in the
//! REPL — lines shown dimmed, the paste of a redirect URL read by the line editor while the
//! loopback callback waits for the browser.
//!
//! An API key is read by the line editor drawn as `*`s and kept out of the history.

use std::io::Stdout;

use anyhow::Result;

use super::Repl;
use super::editor::{LineEditor, Reply};
use crate::agent::tool::BoxFuture;
use crate::ai::oauth::callback::CallbackServer;
use crate::modes::login::{self, LoginUi, Pasted};
use crate::modes::render::{Palette, Renderer};
use crate::support::term;

/// The REPL's side of a sign-in.
struct ReplLogin<'a> {
    editor: &'a mut LineEditor,
    out: &'a mut Renderer<Stdout>,
    palette: Palette,
}

impl ReplLogin<'_> {
    fn show(&mut self, text: &str) {
        let painted = self.palette.dim(&term::text(text));
        let _ = self.out.line(&painted);
    }
}

impl LoginUi for ReplLogin<'_> {
    fn say(&mut self, text: &str) {
        self.show(text);
    }

    fn ask<'a>(&'a mut self, question: &'a str, secret: bool) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let reply = if secret {
                self.editor.read_secret(question).await
            } else {
                self.editor.read(question, "", false).await
            };
            match reply {
                Reply::Line(line) => Some(line.trim().to_owned()),
                Reply::Interrupted
                | Reply::Eof
                | Reply::DoubleEscape
                | Reply::Action { .. }
                | Reply::Failed(_) => None,
            }
        })
    }

    fn code_or_paste<'a>(
        &'a mut self,
        question: &'a str,
        callback: &'a mut CallbackServer,
    ) -> BoxFuture<'a, Pasted> {
        Box::pin(async move {
            let palette = self.palette.clone();
            let out = &mut *self.out;
            let mut read = Box::pin(self.editor.read(question, "", false));
            tokio::select! {
                code = callback.wait() => {
                    // The editor is reading a line: it is finished before the REPL goes on.
                    let _ = out.line(&palette.dim("Browser sign-in received; press Enter to continue"));
                    let _ = read.await;
                    Pasted::Callback(code)
                }
                reply = &mut read => match reply {
                    Reply::Line(line) if !line.trim().is_empty() => Pasted::Input(line),
                    Reply::Line(_) => {
                        drop(read);
                        Pasted::Callback(callback.wait().await)
                    }
                    Reply::Interrupted
                    | Reply::Eof
                    | Reply::DoubleEscape
                    | Reply::Action { .. }
                    | Reply::Failed(_) => {
                        Pasted::Closed
                    }
                },
            }
        })
    }
}

impl Repl {
    /// `/login [provider]`.
    pub(super) async fn login(&mut self, args: Option<&str>) -> Result<()> {
        let words: Vec<String> = args
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let (options, words) = login::login_options(&words);
        let provider = match words.first() {
            Some(provider) => provider.clone(),
            None => {
                self.info("Sign in with an account:")?;
                for (id, name) in login::oauth_providers() {
                    self.info(&format!("  {id:<16} {name}"))?;
                }
                self.info("or save an API key: /login openai, /login openrouter, …")?;
                match self.ask("Provider: ").await {
                    Some(provider) => provider,
                    None => return Ok(()),
                }
            }
        };
        let credentials = self.session.config().credentials.clone();
        let registry = self.session.config().registry.clone();
        let known = |id: &str| registry.all().iter().any(|model| model.provider == id);
        let palette = self.palette();
        let mut ui = ReplLogin {
            editor: &mut self.editor,
            out: &mut self.out,
            palette,
        };
        let outcome = login::login(&provider, &credentials, &mut ui, &known, options).await;
        match outcome {
            Ok(done) => self.info(&done)?,
            Err(error) => self.error(&format!("Login failed: {error}"))?,
        }
        self.refresh_commands();
        Ok(())
    }

    /// `/logout [provider]`.
    pub(super) async fn logout(&mut self, provider: Option<&str>) -> Result<()> {
        let credentials = self.session.config().credentials.clone();
        let provider = match provider {
            Some(provider) => provider.trim().to_owned(),
            None => {
                let stored = credentials.stored();
                if stored.is_empty() {
                    self.info("No stored credentials")?;
                    return Ok(());
                }
                for line in login::status(&credentials, None) {
                    self.info(&format!("  {line}"))?;
                }
                match self.ask("Log out of which provider: ").await {
                    Some(provider) => provider,
                    None => return Ok(()),
                }
            }
        };
        match login::logout(&provider, &credentials) {
            Ok(done) => self.info(&done)?,
            Err(error) => self.error(&format!("Logout failed: {error}"))?,
        }
        Ok(())
    }
}
