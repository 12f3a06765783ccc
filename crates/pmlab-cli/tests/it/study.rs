//! Integration tests for `pmlab study`.
