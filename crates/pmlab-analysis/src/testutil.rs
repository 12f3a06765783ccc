//! Test helper: build a small `Trace` in memory from event definitions and rows, with the
//! same record layout the kernel uses (common fields, then the event's fields).

use pmlab_trace::model::{EventFormat, Field, FieldKind, Trace};

/// A field type for synthetic events.
#[derive(Clone, Copy)]
pub enum Ty {
    U8,
    U32,
    I32,
    I64,
    U64,
    /// `char NAME[16]`
    Comm,
    /// `__data_loc char[] NAME`
    Str,
}

/// A field value.
#[derive(Clone)]
pub enum V {
    U(u64),
    I(i64),
    S(String),
}

pub fn s(v: &str) -> V {
    V::S(v.to_string())
}

#[derive(Default)]
pub struct Builder {
    t: Trace,
    next_id: u16,
    rows: Vec<(u64, u32, i32, u16, Vec<u8>)>,
}

fn common() -> Vec<Field> {
    let f = |name: &str, offset, size, signed| Field {
        name: name.into(),
        type_name: String::new(),
        offset,
        size,
        signed,
        kind: FieldKind::Int,
        common: true,
    };
    vec![
        f("common_type", 0, 2, false),
        f("common_flags", 2, 1, false),
        f("common_preempt_count", 3, 1, false),
        f("common_pid", 4, 4, true),
    ]
}

impl Builder {
    pub fn new(cpus: u32) -> Builder {
        let mut b = Builder {
            next_id: 100,
            ..Default::default()
        };
        b.t.cpus = cpus;
        b.t.long_size = 8;
        b.t.page_size = 4096;
        b.t.meta.ts_in_ns = true;
        b.t.source = "synthetic".into();
        b
    }

    /// Define `system:name` with `fields`; returns its id.
    pub fn event(&mut self, system: &str, name: &str, fields: &[(&str, Ty)]) -> u16 {
        let id = self.next_id;
        self.next_id += 1;
        let mut all = common();
        let mut off = 8u32;
        for (n, ty) in fields {
            let (size, signed, kind) = match ty {
                Ty::U8 => (1, false, FieldKind::Int),
                Ty::U32 => (4, false, FieldKind::Int),
                Ty::I32 => (4, true, FieldKind::Int),
                Ty::I64 => (8, true, FieldKind::Int),
                Ty::U64 => (8, false, FieldKind::Int),
                Ty::Comm => (
                    16,
                    false,
                    FieldKind::Array {
                        elem_size: 1,
                        count: 16,
                        is_char: true,
                    },
                ),
                Ty::Str => (4, false, FieldKind::DataLoc { is_char: true }),
            };
            if matches!(kind, FieldKind::Int) && size == 8 {
                off = off.div_ceil(8) * 8;
            }
            all.push(Field {
                name: n.to_string(),
                type_name: String::new(),
                offset: off,
                size,
                signed,
                kind,
                common: false,
            });
            off += size;
        }
        self.t.formats.insert(
            id,
            EventFormat {
                id,
                system: system.into(),
                name: name.into(),
                fields: all,
                print_fmt: String::new(),
            },
        );
        id
    }

    /// The common events of the analyses, defined with the kernel's field names.
    pub fn std_events(&mut self) -> Std {
        Std {
            cpu_idle: self.event(
                "power",
                "cpu_idle",
                &[("state", Ty::U32), ("cpu_id", Ty::U32)],
            ),
            cpu_frequency: self.event(
                "power",
                "cpu_frequency",
                &[("state", Ty::U32), ("cpu_id", Ty::U32)],
            ),
            switch: self.event(
                "sched",
                "sched_switch",
                &[
                    ("prev_comm", Ty::Comm),
                    ("prev_pid", Ty::I32),
                    ("prev_prio", Ty::I32),
                    ("prev_state", Ty::I64),
                    ("next_comm", Ty::Comm),
                    ("next_pid", Ty::I32),
                    ("next_prio", Ty::I32),
                ],
            ),
            waking: self.event(
                "sched",
                "sched_waking",
                &[
                    ("comm", Ty::Comm),
                    ("pid", Ty::I32),
                    ("prio", Ty::I32),
                    ("target_cpu", Ty::I32),
                ],
            ),
            csfs_entry: self.event(
                "irq_vectors",
                "call_function_single_entry",
                &[("vector", Ty::I32)],
            ),
            timer_entry: self.event("irq_vectors", "local_timer_entry", &[("vector", Ty::I32)]),
            hrtimer: self.event(
                "timer",
                "hrtimer_expire_entry",
                &[
                    ("hrtimer", Ty::U64),
                    ("now", Ty::I64),
                    ("function", Ty::U64),
                ],
            ),
            send_cpu: self.event(
                "ipi",
                "ipi_send_cpu",
                &[
                    ("cpu", Ty::U32),
                    ("callsite", Ty::U64),
                    ("callback", Ty::U64),
                ],
            ),
            irq: self.event(
                "irq",
                "irq_handler_entry",
                &[("irq", Ty::I32), ("name", Ty::Str)],
            ),
            no_ipi: self.event("sched", "sched_wake_idle_without_ipi", &[("cpu", Ty::I32)]),
        }
    }

    pub fn sym(&mut self, addr: u64, name: &str) {
        let mut all: Vec<(u64, &str)> = self.t.kallsyms.iter().collect();
        all.push((addr, name));
        all.sort();
        self.t.kallsyms = pmlab_trace::Kallsyms::from_pairs(all);
    }
    pub fn comm(&mut self, pid: i32, name: &str) {
        self.t.cmdlines.insert(pid, name.into());
    }

    /// Add an event (any order; sorted by timestamp, stable, at build time).
    pub fn push(&mut self, ts: u64, cpu: u32, pid: i32, id: u16, vals: &[V]) {
        let f = &self.t.formats[&id];
        let fields: Vec<&Field> = f.fields.iter().filter(|f| !f.common).collect();
        assert_eq!(fields.len(), vals.len(), "{}: value count", f.name);
        let fixed = fields.iter().map(|f| f.offset + f.size).max().unwrap_or(8) as usize;
        let mut rec = vec![0u8; fixed];
        rec[0..2].copy_from_slice(&id.to_le_bytes());
        rec[4..8].copy_from_slice(&pid.to_le_bytes());
        for (fd, v) in fields.iter().zip(vals) {
            let o = fd.offset as usize;
            let n = fd.size as usize;
            match (&fd.kind, v) {
                (FieldKind::Int, V::U(x)) => rec[o..o + n].copy_from_slice(&x.to_le_bytes()[..n]),
                (FieldKind::Int, V::I(x)) => rec[o..o + n].copy_from_slice(&x.to_le_bytes()[..n]),
                (FieldKind::Array { .. }, V::S(s)) => {
                    let b = s.as_bytes();
                    let k = b.len().min(n - 1);
                    rec[o..o + k].copy_from_slice(&b[..k]);
                }
                (FieldKind::DataLoc { .. }, V::S(s)) => {
                    let start = rec.len();
                    rec.extend_from_slice(s.as_bytes());
                    rec.push(0);
                    let loc = ((s.len() as u32 + 1) << 16) | start as u32;
                    rec[o..o + 4].copy_from_slice(&loc.to_le_bytes());
                }
                _ => panic!("{}: bad value for field {}", f.name, fd.name),
            }
        }
        self.rows.push((ts, cpu, pid, id, rec));
    }

    pub fn build(mut self) -> Trace {
        self.rows.sort_by_key(|r| r.0);
        let mut raw = Vec::new();
        let e = &mut self.t.events;
        for (ts, cpu, pid, id, rec) in self.rows {
            e.push(ts, cpu as u16, pid, id, raw.len(), rec.len());
            raw.extend_from_slice(&rec);
        }
        e.raw = raw.into();
        self.t
    }
}

/// Ids of the standard events defined by [`Builder::std_events`].
#[derive(Clone, Copy)]
pub struct Std {
    pub cpu_idle: u16,
    pub cpu_frequency: u16,
    pub switch: u16,
    pub waking: u16,
    pub csfs_entry: u16,
    pub timer_entry: u16,
    pub hrtimer: u16,
    pub send_cpu: u16,
    pub irq: u16,
    pub no_ipi: u16,
}

pub const EXIT: u64 = 4294967295;

impl Std {
    pub fn idle(&self, b: &mut Builder, ts: u64, cpu: u32, state: u64) {
        b.push(ts, cpu, 0, self.cpu_idle, &[V::U(state), V::U(cpu as u64)]);
    }
    pub fn switch(
        &self,
        b: &mut Builder,
        ts: u64,
        cpu: u32,
        prev: (i32, &str, i64),
        next: (i32, &str),
    ) {
        b.push(
            ts,
            cpu,
            prev.0,
            self.switch,
            &[
                s(prev.1),
                V::I(prev.0 as i64),
                V::I(120),
                V::I(prev.2),
                s(next.1),
                V::I(next.0 as i64),
                V::I(120),
            ],
        );
    }
    pub fn waking(
        &self,
        b: &mut Builder,
        ts: u64,
        cpu: u32,
        waker: i32,
        wakee: (i32, &str),
        target: u32,
    ) {
        b.push(
            ts,
            cpu,
            waker,
            self.waking,
            &[
                s(wakee.1),
                V::I(wakee.0 as i64),
                V::I(120),
                V::I(target as i64),
            ],
        );
    }
}
