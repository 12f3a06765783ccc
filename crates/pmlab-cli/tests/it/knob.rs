//! Integration tests for `pmlab knob`.
