//! Integration tests for `pmlab lab`.
