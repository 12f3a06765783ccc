//! Integration tests for `pmlab run`.
