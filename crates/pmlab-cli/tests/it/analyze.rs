//! Integration tests for `pmlab analyze`.
