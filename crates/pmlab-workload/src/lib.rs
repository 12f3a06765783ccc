//! pmlab-workload: built-in workloads (pipe, messaging, wakeup, spin, idle, cmd),
//! each returning typed metrics.
