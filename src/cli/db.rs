//! `pi db check | backup FILE | reindex`: keeping the database sound.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

use crate::cli::CliContext;
use crate::cli::output::{self, field, line};
use crate::store::maintenance::mark_damaged;
use crate::store::{StoreError, StoreLocation};

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
    // A backup and a check only read (a read-only or damage-marked database can be backed up
    // and checked; the check's rebuild comparison runs on a scratch copy); reindex writes.
    let store = match args.command {
        DbCommand::Backup { .. } => ctx.open_store_read_only()?,
        DbCommand::Check => match ctx.open_store_read_only() {
            Ok(store) => store,
            Err(error) => {
                // A file too damaged to open is marked as damaged all the same.
                let config = ctx.env.store_config(ctx.db.as_deref());
                if let (Some(StoreError::Damaged { .. }), StoreLocation::File(file)) =
                    (error.downcast_ref::<StoreError>(), &config.location)
                {
                    let _ = mark_damaged(file, &[format!("{error:#}")]);
                    let name = file
                        .file_name()
                        .map(|name| name.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    bail!(
                        "{error:#}; pi will not write to it until it is repaired (the mark {name}.damaged was left beside it)"
                    );
                }
                return Err(error);
            }
        },
        DbCommand::Reindex => ctx.open_store()?,
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
                        "{}: {} problem(s) found and the file is damaged; pi changes nothing in it and writes nothing to it until it is repaired (the mark {}.damaged was left beside it) — copy it aside, then restore a backup, or copy what is readable into a new database (`pi export --jsonl` of each session, then `pi --db NEW.db import` of the files, or `sqlite3 FILE .recover`) and move it into place",
                        store.display_path(),
                        report.problems.len(),
                        std::path::Path::new(store.display_path())
                            .file_name()
                            .map(|name| name.to_string_lossy().into_owned())
                            .unwrap_or_default()
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
