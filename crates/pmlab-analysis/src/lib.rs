//! pmlab-analysis: analyses over decoded events and counter deltas — idle residency,
//! wakeup causes, hotplug steps, scheduling latency, frequency residency, energy.
pub mod hotplug;
