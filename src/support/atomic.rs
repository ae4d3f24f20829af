//! Writing a file so that its name never holds a partial file: the bytes go to a temporary
//! name beside it (`.<name>.<pid>.tmp`), are synced, and the temporary file is renamed over the
//! target; on any failure it is removed and the target is untouched.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

fn with_path(what: &str, path: &Path, error: io::Error) -> io::Error {
    io::Error::new(
        error.kind(),
        format!(
            "cannot {what} {}: {error}",
            crate::support::term::line(&path.to_string_lossy())
        ),
    )
}

/// Writes `target` through `write`, all or nothing (see the module docs); creates the
/// target's directory when missing.
pub fn write_atomically<E: From<io::Error>>(
    target: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    write_atomically_with_mode(target, 0o666, write)
}

/// [`write_atomically`] with the temporary file (and so the target) created with `mode`
/// (less the umask): 0600 for files that hold secrets (`auth.json`).
pub fn write_atomically_with_mode<E: From<io::Error>>(
    target: &Path,
    mode: u32,
    write: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    if let Some(dir) = target.parent()
        && !dir.as_os_str().is_empty()
    {
        fs::create_dir_all(dir).map_err(|error| with_path("create", dir, error))?;
    }
    let Some(file_name) = target.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a file name", target.display()),
        )
        .into());
    };
    let temp = target.with_file_name(format!(
        ".{}.{}.tmp",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> Result<(), E> {
        let file = {
            use std::os::unix::fs::OpenOptionsExt as _;
            fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .open(&temp)
        }
        .map_err(|error| with_path("create", &temp, error))?;
        let mut out = BufWriter::new(file);
        write(&mut out)?;
        let file = out
            .into_inner()
            .map_err(|error| with_path("write", &temp, error.into_error()))?;
        file.sync_all()
            .map_err(|error| with_path("write", &temp, error))?;
        fs::rename(&temp, target).map_err(|error| with_path("rename to", target, error))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_neither_the_target_nor_a_temporary_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let target = dir.path().join("out.html");
        std::fs::write(&target, "before").expect("write");
        let failed: Result<(), io::Error> = write_atomically(&target, |out| {
            out.write_all(b"half")?;
            Err(io::Error::other("the writer failed"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "before");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("out.html")]);
        let written: Result<(), io::Error> =
            write_atomically(&target, |out| out.write_all(b"after"));
        assert!(written.is_ok());
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "after");
    }
}
