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
#[error("event format {event}: {msg}")]
pub struct FormatError {
    /// `system/name` when known, else `?`.
    pub event: String,
    pub msg: String,
}

/// An error while opening or decoding a trace file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: {msg}")]
    Malformed { path: PathBuf, msg: String },
    #[error("{path}: {err}")]
    Format { path: PathBuf, err: FormatError },
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
