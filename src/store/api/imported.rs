//! The records of imported reference files.

use crate::store::imported::*;
use crate::store::sql::{self};
use crate::store::{Result, SessionStore};

impl SessionStore {
    /// Returns the record of the file at this canonical path, if an import read it.
    pub fn file_record(&self, file: &[u8]) -> Result<Option<FileRecord>> {
        self.read(|db| record_in(db, file))
    }

    /// Returns the records of every file under a directory (`dir` is its canonical path with
    /// a trailing `/`), in path order — one indexed range query, whatever their number.
    pub fn file_records_under(&self, dir: &[u8]) -> Result<Vec<FileRecord>> {
        self.read(|db| {
            Ok(sql::imported_files_under(db, dir)?
                .into_iter()
                .map(FileRecord::from_row)
                .collect())
        })
    }

    /// Returns `(canonical path, size, mtime_ns)` of every file recorded under a directory
    /// (`dir` with a trailing `/`): the one query of the check at start, on the records'
    /// table alone.
    pub fn file_stats_under(&self, dir: &[u8]) -> Result<Vec<(Vec<u8>, u64, i64)>> {
        self.read(|db| {
            Ok(sql::imported_stats_under(db, dir)?
                .into_iter()
                .map(|(file, size, mtime_ns)| (file, u64::try_from(size).unwrap_or(0), mtime_ns))
                .collect())
        })
    }

    /// Records a file of which nothing was stored (it was refused), so that an unchanged
    /// file is not read again by the automatic import.
    pub fn record_unstored_file(&self, mark: &FileMark) -> Result<()> {
        let imported_at = self.clock().now_iso();
        self.write(|db| put_record(db, mark, None, &imported_at))
    }
}
