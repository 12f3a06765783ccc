//! Integration tests for `pmlab info`.
