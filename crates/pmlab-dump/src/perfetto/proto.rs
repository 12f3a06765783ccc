//! The few Perfetto trace messages the export writes, by hand with prost derives (no protoc):
//! names and field numbers from Perfetto's protos/perfetto/trace/{trace_packet,
//! system_info}.proto, ps/process_tree.proto and ftrace/{ftrace_event_bundle, ftrace_event,
//! sched, power, ftrace, generic}.proto. Perfetto's protos are proto2: scalars are
//! `optional`, so a zero (pid 0, state 0) is written, not dropped as a default.

/// `TracePacket`: one record of the `Trace` (field 1, repeated, of the file's top message).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "1")]
    pub ftrace_events: Option<FtraceEventBundle>,
    #[prost(message, optional, tag = "2")]
    pub process_tree: Option<ProcessTree>,
    #[prost(message, optional, tag = "45")]
    pub system_info: Option<SystemInfo>,
}

/// `FtraceEventBundle`: events of one CPU, in timestamp order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FtraceEventBundle {
    #[prost(uint32, optional, tag = "1")]
    pub cpu: Option<u32>,
    #[prost(message, repeated, tag = "2")]
    pub event: Vec<FtraceEvent>,
    /// Events were lost in the ring buffer before this bundle.
    #[prost(bool, optional, tag = "3")]
    pub lost_events: Option<bool>,
}

/// `FtraceEvent`: common fields and one typed payload (a `oneof` in Perfetto's proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FtraceEvent {
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    #[prost(uint32, optional, tag = "5")]
    pub common_flags: Option<u32>,
    #[prost(oneof = "Payload", tags = "3, 4, 11, 13, 17, 20, 327")]
    pub payload: Option<Payload>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Payload {
    #[prost(message, tag = "3")]
    Print(PrintFtraceEvent),
    #[prost(message, tag = "4")]
    SchedSwitch(SchedSwitchFtraceEvent),
    #[prost(message, tag = "11")]
    CpuFrequency(CpuStateFtraceEvent),
    #[prost(message, tag = "13")]
    CpuIdle(CpuStateFtraceEvent),
    #[prost(message, tag = "17")]
    SchedWakeup(SchedWakeupFtraceEvent),
    #[prost(message, tag = "20")]
    SchedWaking(SchedWakeupFtraceEvent),
    #[prost(message, tag = "327")]
    Generic(GenericFtraceEvent),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SchedSwitchFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub prev_comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub prev_pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prev_prio: Option<i32>,
    #[prost(int64, optional, tag = "4")]
    pub prev_state: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub next_comm: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub next_pid: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub next_prio: Option<i32>,
}

/// `SchedWakeupFtraceEvent` and `SchedWakingFtraceEvent` (the same fields and numbers).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SchedWakeupFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub success: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub target_cpu: Option<i32>,
}

/// `CpuIdleFtraceEvent` and `CpuFrequencyFtraceEvent` (the same fields and numbers).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CpuStateFtraceEvent {
    #[prost(uint32, optional, tag = "1")]
    pub state: Option<u32>,
    #[prost(uint32, optional, tag = "2")]
    pub cpu_id: Option<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PrintFtraceEvent {
    #[prost(uint64, optional, tag = "1")]
    pub ip: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub buf: Option<String>,
}

/// Any event without a typed message: its name and its fields by name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GenericFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub event_name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub field: Vec<GenericField>,
}

/// `GenericFtraceEvent.Field`: a name and one value (a `oneof`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct GenericField {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(oneof = "GenericValue", tags = "3, 4, 5")]
    pub value: Option<GenericValue>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum GenericValue {
    #[prost(string, tag = "3")]
    Str(String),
    #[prost(int64, tag = "4")]
    Int(i64),
    #[prost(uint64, tag = "5")]
    Uint(u64),
}

/// `SystemInfo`: Perfetto decodes `prev_state` by the kernel release in `utsname`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SystemInfo {
    #[prost(message, optional, tag = "1")]
    pub utsname: Option<Utsname>,
    #[prost(uint32, optional, tag = "6")]
    pub page_size: Option<u32>,
    #[prost(uint32, optional, tag = "8")]
    pub num_cpus: Option<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Utsname {
    #[prost(string, optional, tag = "1")]
    pub sysname: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub version: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub release: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub machine: Option<String>,
}

/// `ProcessTree`: processes and the threads that belong to them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessTree {
    #[prost(message, repeated, tag = "1")]
    pub processes: Vec<Process>,
    #[prost(message, repeated, tag = "2")]
    pub threads: Vec<Thread>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Process {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub ppid: Option<i32>,
    #[prost(string, repeated, tag = "3")]
    pub cmdline: Vec<String>,
    /// `cmdline` holds the task's comm, not its argv.
    #[prost(bool, optional, tag = "9")]
    pub cmdline_is_comm: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Thread {
    #[prost(int32, optional, tag = "1")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(int32, optional, tag = "3")]
    pub tgid: Option<i32>,
}
