//! ftrace text reader (stub).
use crate::error::Malformed;
use crate::model::Trace;
pub fn parse(_bytes: &[u8]) -> Result<Trace, Malformed> {
    Err(Malformed("not a trace.dat file and not ftrace text".into()))
}
