//! `pi db check | backup FILE | reindex`: keeping the database sound.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

use crate::cli::CliContext;
use crate::cli::output::{self, field, line};

/// Check, back up or reindex the database
#[derive(Debug, Args)]
pub struct DbArgs {
    /// What to do
    #[command(subcommand)]
    pub command: DbCommand,
}

/// The `db` subcommands (declared lazily, as [`crate::cli::Command`]).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum DbCommand {
    /// Check integrity, orphans and that derived tables match the entries
    Check,
    /// Write a consistent copy of the database to FILE (safe while pi is writing)
    Backup {
        /// The backup file to create (must not exist)
        file: PathBuf,
    },
    /// Rebuild statistics, path state and the full-text index from the entries
    Reindex,
}

/// Runs a `db` subcommand.
pub fn run_db(args: DbArgs, ctx: &CliContext) -> Result<()> {
    // A backup only reads (a read-only database can be backed up); check and reindex write.
    let store = match args.command {
        DbCommand::Backup { .. } => ctx.open_store_read_only()?,
        DbCommand::Check | DbCommand::Reindex => ctx.open_store()?,
    };
    let mut out = output::stdout();
    let style = ctx.style();
    match args.command {
        DbCommand::Check => {
            let report = store.check()?;
            if report.problems.is_empty() {
                line(
                    &mut out,
                    &style.ok(&format!(
                        "ok: {} ({} sessions, {} entries)",
                        store.display_path(),
                        report.sessions,
                        report.entries
                    )),
                )?;
                out.flush()?;
            } else {
                for problem in &report.problems {
                    line(&mut out, &field(problem))?;
                }
                out.flush()?;
                if report.damaged {
                    bail!(
                        "{}: {} problem(s) found and the file is damaged; pi changes nothing in it — copy it aside, then salvage what is readable with `sqlite3 FILE .recover` or restore a backup",
                        store.display_path(),
                        report.problems.len()
                    );
                }
                bail!(
                    "{}: {} problem(s) found; `pi db reindex` rebuilds derived data, `pi db backup` first keeps a copy",
                    store.display_path(),
                    report.problems.len()
                );
            }
        }
        DbCommand::Backup { file } => {
            let dest = ctx.env.absolute(&file);
            store.backup(&dest)?;
            line(
                &mut out,
                &format!(
                    "backed up {} to {}",
                    field(store.display_path()),
                    field(&dest.to_string_lossy())
                ),
            )?;
            out.flush()?;
        }
        DbCommand::Reindex => {
            store.rebuild_derived()?;
            line(&mut out, &format!("reindexed {}", store.display_path()))?;
            out.flush()?;
        }
    }
    Ok(())
}
