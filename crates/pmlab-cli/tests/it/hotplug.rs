//! Integration tests for `pmlab hotplug`.
