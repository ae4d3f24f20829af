//! Reading a file named by a user or found in a directory, when it may be anything: only a
//! regular file is read (a FIFO would block the reader forever, `/dev/zero` never ends), and
//! no line longer than a bound is held — the read stops there, before memory grows past it.
//!
//! Invariant: a file that is not regular is never read, and opening it has no effect
//! (`O_NONBLOCK`, `O_NOCTTY`); the kind is checked before the open and again on the open
//! file, so a file replaced in between is refused too.

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path names something other than a regular file (a symlink to one is fine).
    #[error("not a regular file ({kind}); only regular files are read (a symlink to one is fine)")]
    NotRegular {
        /// What it is: "a FIFO", "a character device", …
        kind: &'static str,
    },
    /// A line is longer than the bound; nothing after its first `limit` bytes was read.
    #[error("line {line} is longer than {}, the longest line pi reads", describe_bytes(*limit))]
    LineTooLong {
        /// Its 1-based number.
        line: usize,
        /// The bound, in bytes.
        limit: usize,
    },
    /// Opening or reading failed.
    #[error("cannot read the file: {0}")]
    Io(#[from] io::Error),
}

/// `268435456` → `256 MiB`.
fn describe_bytes(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Names a file type for [`ReadError::NotRegular`].
fn kind_of(file_type: FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Returns an error unless `path` (followed through symlinks) is a regular file.
pub fn check_regular(path: &Path) -> Result<(), ReadError> {
    let file_type = std::fs::metadata(path)?.file_type();
    if file_type.is_file() {
        Ok(())
    } else {
        Err(ReadError::NotRegular {
            kind: kind_of(file_type),
        })
    }
}

/// How much is read at a time.
const CHUNK: usize = 1 << 20;

/// Reads the regular file at `path` whole, refusing it at the first line (LF-terminated, or
/// the last one) longer than `max_line_bytes`: memory never holds more than the lines before
/// it plus `max_line_bytes`.
pub fn read_regular(path: &Path, max_line_bytes: usize) -> Result<Vec<u8>, ReadError> {
    let mut file = open_regular(path)?;
    read_lines_bounded_from(&mut file, 1, max_line_bytes)
}

/// Opens the regular file at `path` for reading, refusing anything else before and after
/// opening (opened without blocking: a FIFO swapped in between is not waited for).
pub fn open_regular(path: &Path) -> Result<File, ReadError> {
    check_regular(path)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)?;
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        return Err(ReadError::NotRegular {
            kind: kind_of(file_type),
        });
    }
    Ok(file)
}

/// Reads `file` from its position to its end, refusing it at the first line longer than
/// `max_line_bytes` (lines numbered from `first_line`, the number of the line at the
/// position).
pub fn read_lines_bounded_from(
    file: &mut File,
    first_line: usize,
    max_line_bytes: usize,
) -> Result<Vec<u8>, ReadError> {
    let expected = file
        .metadata()
        .map(|meta| usize::try_from(meta.len()).unwrap_or(usize::MAX))
        .unwrap_or(0);
    // The whole file when it fits the bound; a longer one grows as its lines arrive.
    let mut bytes = Vec::with_capacity(expected.min(max_line_bytes.saturating_add(CHUNK)));
    let mut chunk = vec![0u8; CHUNK];
    let mut line_start = 0usize;
    let mut line = first_line;
    loop {
        let read = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error.into()),
        };
        let piece = &chunk[..read];
        let base = bytes.len();
        for newline in memchr::memchr_iter(b'\n', piece) {
            if base + newline - line_start > max_line_bytes {
                return Err(ReadError::LineTooLong {
                    line,
                    limit: max_line_bytes,
                });
            }
            line_start = base + newline + 1;
            line += 1;
        }
        if base + read - line_start > max_line_bytes {
            return Err(ReadError::LineTooLong {
                line,
                limit: max_line_bytes,
            });
        }
        bytes.extend_from_slice(piece);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(content: &[u8], limit: usize) -> Result<Vec<u8>, ReadError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        std::fs::write(&path, content).unwrap();
        read_regular(&path, limit)
    }

    #[test]
    fn lines_up_to_the_bound_are_read_and_a_longer_one_is_named() {
        assert_eq!(read(b"abc\nde\n", 3).unwrap(), b"abc\nde\n");
        assert_eq!(read(b"abc\ndef", 3).unwrap(), b"abc\ndef");
        assert!(matches!(
            read(b"abc\nde\nfghi\n", 3),
            Err(ReadError::LineTooLong { line: 3, limit: 3 })
        ));
        assert!(matches!(
            read(b"ab\nlast-line", 3),
            Err(ReadError::LineTooLong { line: 2, .. })
        ));
        let message = ReadError::LineTooLong {
            line: 7,
            limit: 256 << 20,
        }
        .to_string();
        assert_eq!(
            message,
            "line 7 is longer than 256 MiB, the longest line pi reads"
        );
    }

    #[test]
    fn devices_and_directories_are_not_read() {
        for (path, kind) in [("/dev/zero", "a character device"), ("/", "a directory")] {
            match read_regular(Path::new(path), 16) {
                Err(ReadError::NotRegular { kind: found }) => assert_eq!(found, kind),
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
