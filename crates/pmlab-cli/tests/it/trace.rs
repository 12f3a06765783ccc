//! Integration tests for `pmlab trace`.
