//! Integration tests for `pmlab record`.
