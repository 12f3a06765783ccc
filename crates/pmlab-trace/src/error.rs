//! Errors of the trace readers: every error names the file (or event format) it failed on.

use std::path::PathBuf;

/// What went wrong while decoding bytes, without the file name (the readers add it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

impl Malformed {
    pub fn new(msg: impl Into<String>) -> Malformed {
        Malformed(msg.into())
    }
}

/// Shorthand: return early with a [`Malformed`] built from a format string.
#[macro_export]
#[doc(hidden)]
macro_rules! malformed {
    ($($arg:tt)*) => { return Err($crate::error::Malformed(format!($($arg)*)).into()) };
}

/// An error while parsing an event `format` file or `header_page`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event format {event}: {problem}")]
pub struct FormatError {
    /// `system/name` when known, else `?`.
    pub event: String,
    /// Boxed: the errors that carry a `FormatError` stay small.
    pub problem: Box<FormatProblem>,
}

/// What is wrong in a `format` file or `header_page`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatProblem {
    #[error("expected `{key}:` in `{part}`")]
    MissingKey { key: &'static str, part: String },
    #[error("bad {key} `{value}`")]
    BadNumber { key: &'static str, value: String },
    #[error("no {0} field")]
    NoHeaderField(&'static str),
    #[error("timestamp size {0}, expected 8")]
    TimestampSize(u32),
    #[error("commit size {0}, expected 4 or 8")]
    CommitSize(u32),
    #[error("data offset {0} overlaps the commit field")]
    DataOverlapsCommit(u32),
    #[error("bad ID `{0}`")]
    BadId(String),
    #[error("ID {0} does not fit in 16 bits")]
    IdTooLarge(u32),
    #[error("field before `format:`")]
    FieldBeforeFormat,
    #[error("unexpected line `{0}`")]
    UnexpectedLine(String),
    #[error("no `{0}:` line")]
    NoLine(&'static str),
    #[error("no fields")]
    NoFields,
    #[error("field {field}: dynamic field of size {size}, expected 4")]
    DynamicSize { field: String, size: u32 },
    #[error(
        "field {field}: unsupported type `{type_name}` of size {size} (integers and pointers \
         are 1, 2, 4 or 8 bytes)"
    )]
    UnsupportedSize {
        field: String,
        type_name: String,
        size: u32,
    },
    #[error("empty field declaration")]
    EmptyDeclaration,
    #[error("unclosed `[` in `{0}`")]
    UnclosedBracket(String),
    #[error("bad field name `{0}`")]
    BadFieldName(String),
    #[error("no type in `{0}`")]
    NoType(String),
}

/// An error while opening or decoding a trace file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // The message repeats the cause (as before): `error_chain` skips a cause the text
    // already ends with, and callers walking `source()` get the typed one.
    #[error("{path}: {err}")]
    Io {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Malformed { path: PathBuf, msg: String },
    #[error("{path}: {err}")]
    Format {
        path: PathBuf,
        #[source]
        err: FormatError,
    },
}

impl TraceError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: path.into(),
            err: source,
        }
    }
    pub fn malformed(path: impl Into<PathBuf>, msg: impl Into<String>) -> TraceError {
        TraceError::Malformed {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_is_the_cause_and_printed_once() {
        let e = TraceError::io("/x.dat", std::io::Error::from_raw_os_error(2));
        let cause = std::error::Error::source(&e).expect("typed cause");
        let io = cause
            .downcast_ref::<std::io::Error>()
            .expect("an io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        let chain = pmlab_kernel::error_chain(&e);
        assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
    }
}
