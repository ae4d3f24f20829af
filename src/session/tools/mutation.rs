//! The per-file mutation queue (`spec/tools.md` §1.3): `edit` and `write` hold a FIFO lock
//! keyed by the file's canonical path for their whole read-modify-write, so two mutations of
//! one file in the same batch of parallel tool calls apply one after the other; different
//! files proceed in parallel.
//!
//! The key is the realpath when the file exists, else the resolved absolute path (as the
//! reference computes it). The table is process-wide, like the reference's module-level map,
//! so two sessions in one process also serialise on a shared file.
//!
//! Invariant: an entry lives only while someone holds or waits for its lock; waiters are
//! served in arrival order (tokio's mutex is fair).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;

use crate::agent::tool::ToolError;
use crate::session::tools::workspace::blocking;

type Table = Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Holds a file's mutation lock; dropping it lets the next waiter in.
#[derive(Debug)]
pub struct FileMutationGuard {
    key: PathBuf,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Drop for FileMutationGuard {
    fn drop(&mut self) {
        let lock = self
            .guard
            .take()
            .map(|guard| OwnedMutexGuard::mutex(&guard).clone());
        // Release before inspecting the table so a waiter is not counted as a holder.
        let mut table = match table().lock() {
            Ok(table) => table,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(lock) = lock {
            // Table + this handle are the only references: nobody waits, remove the entry.
            if Arc::strong_count(&lock) <= 2 {
                table.remove(&self.key);
            }
        }
    }
}

/// Returns the queue key for a resolved path: its realpath, or the path itself when it does
/// not exist.
pub fn mutation_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Waits for the mutation lock of `path` (already resolved and absolute).
pub async fn lock_file(path: &Path) -> FileMutationGuard {
    let key = {
        let owned = path.to_path_buf();
        // A failed blocking task (runtime shutting down) falls back to the unresolved path.
        tokio::task::spawn_blocking(move || mutation_key(&owned))
            .await
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let lock = {
        let mut table = match table().lock() {
            Ok(table) => table,
            Err(poisoned) => poisoned.into_inner(),
        };
        table
            .entry(key.clone())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
            .clone()
    };
    let guard = lock.lock_owned().await;
    FileMutationGuard {
        key,
        guard: Some(guard),
    }
}

/// Runs a mutation of `path` (resolved and absolute) on the blocking pool while holding its
/// lock: waits for the lock, reports `Operation aborted` if the call was aborted meanwhile (so
/// nothing is touched after an abort was reported), then runs `work` with the lock held.
pub async fn with_file_lock<T, F>(
    path: &Path,
    cancel: &CancellationToken,
    work: F,
) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    let _guard = lock_file(path).await;
    if cancel.is_cancelled() {
        return Err(ToolError::aborted());
    }
    blocking(work).await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn same_file_serialises_and_the_table_empties() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.txt");
        let inside = Arc::new(AtomicUsize::new(0));
        let max_inside = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for _ in 0..4 {
            let file = file.clone();
            let inside = inside.clone();
            let max_inside = max_inside.clone();
            handles.push(tokio::spawn(async move {
                let _guard = lock_file(&file).await;
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        for handle in handles {
            handle.await.unwrap();
        }
        assert_eq!(max_inside.load(Ordering::SeqCst), 1);
        let key = mutation_key(&file);
        assert!(!table().lock().unwrap().contains_key(&key));
    }
}
