//! `pi db check | backup FILE | reindex | recover FILE`: keeping the database sound.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

use crate::cli::CliContext;
use crate::cli::output::{self, field, line};
use crate::jsonl::SessionReader;
use crate::store::maintenance::mark_damaged;
use crate::store::{
    ImportMode, ImportOptions, ListScope, SessionStore, StepPacing, StoreError, StoreLocation,
};

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
    /// Copy every session a damaged database can still read into a new database FILE
    Recover {
        /// The new database to create (must not exist)
        file: PathBuf,
    },
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
        // Reads only: the database is usually damaged (and marked so).
        DbCommand::Recover { .. } => ctx.open_store_read_only()?,
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
                        "{}: {} problem(s) found and the file is damaged; pi changes nothing in it and writes nothing to it until it is repaired (the mark {}.damaged was left beside it) — `pi db recover NEW.db` copies every session it can still read into a new database, to move into place of this one (or restore a backup; `sqlite3 FILE .recover` salvages rows)",
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
            let done = store.reindex(reindex_pacing(ctx), &mut |_| {})?;
            let went_on = if done.resumed {
                " (went on from a reindex that had stopped part-way)"
            } else {
                ""
            };
            line(
                &mut out,
                &format!(
                    "reindexed {}: {} session{}{went_on}",
                    field(store.display_path()),
                    done.sessions,
                    if done.sessions == 1 { "" } else { "s" }
                ),
            )?;
            out.flush()?;
        }
        DbCommand::Recover { file } => {
            let dest = ctx.env.absolute(&file);
            recover(ctx, &store, &dest, &mut out)?;
        }
    }
    Ok(())
}

/// The reindex's pacing: the staged import's, unless `PI_REINDEX_STEP_MS` (a test's way to
/// make many small steps) says otherwise.
fn reindex_pacing(ctx: &CliContext) -> StepPacing {
    let mut pacing = StepPacing::default();
    if let Some(ms) = ctx
        .env
        .var("PI_REINDEX_STEP_MS")
        .and_then(|value| value.parse::<u64>().ok())
    {
        pacing.step = std::time::Duration::from_millis(ms);
    }
    pacing
}

/// `pi db recover FILE`: every session `store` can still list is exported as the reference's
/// JSONL (as `pi export --jsonl` writes it) and imported into a new database, written beside
/// FILE under a temporary name (`.<name>.<pid>.pi-recover`) and renamed to FILE once complete
/// (FILE is never replaced). A session whose export stops at an unreadable page keeps the
/// lines read before it ("partly"). Quarantined input lines, leases and the record of
/// imported reference files are not copied.
fn recover(
    ctx: &CliContext,
    store: &SessionStore,
    dest: &Path,
    out: &mut impl Write,
) -> Result<()> {
    if std::fs::symlink_metadata(dest).is_ok() {
        bail!(
            "{}: the file exists; `pi db recover` never overwrites a file — choose another name",
            dest.display()
        );
    }
    let name = dest
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "recovered.db".to_owned());
    let dir = match dest.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = dir.join(format!(".{name}.{}.pi-recover", std::process::id()));
    let remove_temp = || {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", temp.display()));
        }
    };
    remove_temp();
    let sessions = store.list(&ListScope::All).map_err(|error| {
        anyhow::anyhow!(
            "{error}; no session could be listed, so nothing was recovered (`sqlite3 FILE .recover` may still salvage rows)"
        )
    })?;
    let mut config = ctx.env.store_config(Some(&temp));
    config.location = StoreLocation::File(temp.clone());
    let result = (|| -> Result<(usize, usize, usize)> {
        let target = SessionStore::open(config)?;
        let (mut whole, mut partly, mut lost) = (0, 0, 0);
        for session in &sessions {
            let mut bytes = Vec::new();
            let exported = store.export_jsonl(&session.id, &mut bytes);
            let imported = import_bytes(&target, &bytes, session.id.as_str());
            match (&exported, imported) {
                (Ok(_), Ok(entries)) => {
                    whole += 1;
                    line(
                        out,
                        &format!(
                            "recovered  {}  ({entries} entries)",
                            field(session.id.as_str())
                        ),
                    )?;
                }
                (Err(error), Ok(entries)) => {
                    partly += 1;
                    line(
                        out,
                        &format!(
                            "partly     {}  ({entries} of {} entries; then: {})",
                            field(session.id.as_str()),
                            session.entries,
                            field(&error.to_string())
                        ),
                    )?;
                }
                (_, Err(error)) => {
                    lost += 1;
                    line(
                        out,
                        &format!(
                            "lost       {}  ({})",
                            field(session.id.as_str()),
                            field(&error)
                        ),
                    )?;
                }
            }
        }
        drop(target);
        Ok((whole, partly, lost))
    })();
    let (whole, partly, lost) = match result {
        Ok(counts) => counts,
        Err(error) => {
            remove_temp();
            return Err(error);
        }
    };
    if std::fs::symlink_metadata(dest).is_ok() {
        remove_temp();
        bail!(
            "{}: the file appeared meanwhile; `pi db recover` never overwrites a file — nothing was written under that name",
            dest.display()
        );
    }
    std::fs::rename(&temp, dest)?;
    remove_temp();
    std::fs::File::open(&dir).and_then(|handle| handle.sync_all())?;
    line(
        out,
        &format!(
            "{whole} sessions recovered whole, {partly} partly, {lost} lost, into {}; check it with `pi --db {} db check`, then move it into place of {}",
            field(&dest.to_string_lossy()),
            field(&dest.to_string_lossy()),
            field(store.display_path())
        ),
    )?;
    out.flush()?;
    Ok(())
}

/// Imports one exported session (its JSONL bytes) into `target`; returns its entry count, or
/// why nothing of it could be stored.
fn import_bytes(target: &SessionStore, bytes: &[u8], source: &str) -> Result<i64, String> {
    let reader = SessionReader::new(bytes).map_err(|error| error.to_string())?;
    let header = reader.header().clone();
    let header_bytes = reader.header_bytes().to_vec();
    let options = ImportOptions {
        source,
        mode: ImportMode::Merge,
    };
    let report = target
        .import_lines(&header, &header_bytes, reader.map(Ok), &options)
        .map_err(|error| error.to_string())?;
    Ok(report.entries)
}
