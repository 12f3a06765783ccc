//! The one integration-test binary: runs the real `pmlab` binary, and on a machine
//! that has them, the real kernel interfaces (tracefs, cpuidle, haltpoll, hotplug).

mod sshd;
mod util;

mod analyze;
mod bundle;
mod fleet;
mod hotplug;
mod info;
mod interrupt;
mod knob;
mod lab;
mod lineup;
mod needless;
mod observer;
mod perfetto;
mod record;
mod remote;
mod run;
mod study;
mod trace;
mod whatif;
