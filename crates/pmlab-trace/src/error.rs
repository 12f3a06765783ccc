//! Errors of the trace readers: every error names the file (or event format) it failed on.

use std::path::PathBuf;

/// What went wrong while decoding bytes, without the file name (the readers add it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

impl Malformed {
    /// A decoding error with this message.
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
    /// A `key:` part is missing.
    #[error("expected `{key}:` in `{part}`")]
    MissingKey {
        /// The key expected (`offset`, `size`, ...).
        key: &'static str,
        /// The text it was looked for in.
        part: String,
    },
    /// A number that does not parse.
    #[error("bad {key} `{value}`")]
    BadNumber {
        /// The key whose value is not a number.
        key: &'static str,
        /// The value found.
        value: String,
    },
    /// `header_page` lacks this field.
    #[error("no {0} field")]
    NoHeaderField(&'static str),
    /// `header_page`'s timestamp field is not 8 bytes.
    #[error("timestamp size {0}, expected 8")]
    TimestampSize(u32),
    /// `header_page`'s commit field is neither 4 nor 8 bytes.
    #[error("commit size {0}, expected 4 or 8")]
    CommitSize(u32),
    /// `header_page`'s data starts inside the commit field.
    #[error("data offset {0} overlaps the commit field")]
    DataOverlapsCommit(u32),
    /// The `ID:` line is not a number.
    #[error("bad ID `{0}`")]
    BadId(String),
    /// The `ID:` is above 65535 (ring-buffer ids are 16-bit).
    #[error("ID {0} does not fit in 16 bits")]
    IdTooLarge(u32),
    /// A `field:` line came before the `format:` line.
    #[error("field before `format:`")]
    FieldBeforeFormat,
    /// A line that is none of the known ones.
    #[error("unexpected line `{0}`")]
    UnexpectedLine(String),
    /// A required line (`name`, `ID`, `format`) is missing.
    #[error("no `{0}:` line")]
    NoLine(&'static str),
    /// The format declares no fields.
    #[error("no fields")]
    NoFields,
    /// A `__data_loc`/`__rel_loc` field that is not 4 bytes.
    #[error("field {field}: dynamic field of size {size}, expected 4")]
    DynamicSize {
        /// The field's name.
        field: String,
        /// Its declared size, bytes.
        size: u32,
    },
    #[error(
        "field {field}: unsupported type `{type_name}` of size {size} (integers and pointers \
         are 1, 2, 4 or 8 bytes)"
    )]
    /// A field size the decoder does not read (not 1, 2, 4 or 8 bytes, nor an array of such).
    UnsupportedSize {
        /// The field's name.
        field: String,
        /// Its C type as written.
        type_name: String,
        /// Its declared size, bytes.
        size: u32,
    },
    /// A `field:` with nothing declared.
    #[error("empty field declaration")]
    EmptyDeclaration,
    /// An array bracket that is not closed.
    #[error("unclosed `[` in `{0}`")]
    UnclosedBracket(String),
    /// A field name that is not a C identifier.
    #[error("bad field name `{0}`")]
    BadFieldName(String),
    /// A declaration without a type.
    #[error("no type in `{0}`")]
    NoType(String),
}

/// An error while opening or decoding a trace file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // The message repeats the cause (as before): `error_chain` skips a cause the text
    // already ends with, and callers walking `source()` get the typed one.
    /// Reading the file failed.
    #[error("{path}: {err}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        err: std::io::Error,
    },
    /// The content does not decode.
    #[error("{path}: {msg}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the byte offset where known.
        msg: String,
    },
    /// An event format inside the file does not parse.
    #[error("{path}: {err}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The format error.
        #[source]
        err: FormatError,
    },
}

impl TraceError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: path.into(),
            err: source,
        }
    }
    /// Malformed content in `path`.
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
