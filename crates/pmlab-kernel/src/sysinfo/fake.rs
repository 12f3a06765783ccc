//! Fake sysfs/procfs trees in a temp dir for tests (here, and in other crates' tests): CPUs,
//! cpuidle states, haltpoll, cpufreq (intel_pstate with EPP), RAPL, mounts and debugfs, plus
//! three ready machines.

use crate::Root;
use std::fs;
use std::path::Path;

/// A fake kernel tree in a temp dir, removed on drop; builder methods add files to it.
pub struct FakeTree {
    _dir: tempfile::TempDir,
    /// The root to hand to readers and writers.
    pub root: Root,
}

const CPU: &str = "/sys/devices/system/cpu";

impl Default for FakeTree {
    fn default() -> Self {
        Self::new()
    }
}

/// /proc/cpuinfo flags of a bare-metal Intel CPU.
pub const INTEL_FLAGS: &str = "fpu vme de pse tsc msr constant_tsc nonstop_tsc";
/// /proc/cpuinfo flags of a guest (with `hypervisor`).
pub const GUEST_FLAGS: &str = "fpu vme tsc hypervisor x2apic";

impl FakeTree {
    /// Bare metal: 8 CPUs (2 threads per core, cpu1-7 hot-pluggable), intel_idle with
    /// POLL/C1/C1E/C6, intel_pstate with EPP, RAPL, tracefs and debugfs mounted.
    pub fn intel_box() -> FakeTree {
        let t = FakeTree::new();
        t.machine("Intel(R) Core(TM) i7-1280P", INTEL_FLAGS, 8, 2, 1)
            .cpuidle(
                8,
                "intel_idle",
                "menu",
                "ladder menu teo",
                &[
                    ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0),
                    ("C1", "MWAIT 0x00", 1, 1),
                    ("C1E", "MWAIT 0x01", 2, 4),
                    ("C6", "MWAIT 0x20", 170, 600),
                ],
            )
            .intel_pstate(8)
            .rapl()
            .tracefs_mounted()
            .debugfs_sched("GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY TTWU_QUEUE")
            .clocksource("tsc", "tsc hpet acpi_pm");
        t
    }

    /// One CPU, no cpuidle directory at all, nothing else.
    pub fn no_cpuidle() -> FakeTree {
        let t = FakeTree::new();
        t.machine("Some CPU", INTEL_FLAGS, 1, 1, 1);
        t
    }

    /// The project's KVM guest: 2 CPUs (cpu1 hot-pluggable), haltpoll parameters,
    /// kvm-clock; with the cpuidle-haltpoll driver (POLL + haltpoll states) or with
    /// no cpuidle driver registered (`current_driver` = none).
    pub fn haltpoll_guest(driver: bool) -> FakeTree {
        let t = FakeTree::new();
        t.machine("AMD EPYC", GUEST_FLAGS, 2, 1, 1)
            .haltpoll(false)
            .clocksource("tsc", "tsc kvm-clock");
        if driver {
            t.cpuidle(
                2,
                "haltpoll",
                "haltpoll",
                "ladder menu haltpoll",
                &[
                    ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0),
                    ("haltpoll", "default architecture idle", 1, 1),
                ],
            );
        } else {
            let d = "/sys/devices/system/cpu/cpuidle";
            t.put(&format!("{d}/current_driver"), "none\n")
                .put(&format!("{d}/current_governor"), "menu\n")
                .put(
                    &format!("{d}/available_governors"),
                    "ladder menu haltpoll \n",
                )
                .put("/sys/module/cpuidle/parameters/off", "0\n");
        }
        t
    }

    /// The temp dir holding the tree (pass it as `--root`).
    pub fn path(&self) -> &Path {
        self._dir.path()
    }

    /// An empty tree with a /proc/mounts listing only sysfs.
    pub fn new() -> FakeTree {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let t = FakeTree { _dir: dir, root };
        t.put("/proc/mounts", "sysfs /sys sysfs rw 0 0\n");
        t
    }

    /// Write `text` to the kernel path `abs` inside the tree (parents created).
    pub fn put(&self, abs: &str, text: &str) -> &Self {
        let p = self.root.path(abs);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
        self
    }

    /// Create the kernel directory `abs` inside the tree.
    pub fn mkdir(&self, abs: &str) -> &Self {
        fs::create_dir_all(self.root.path(abs)).unwrap();
        self
    }

    /// Add a line to the tree's /proc/mounts.
    pub fn mount(&self, dev: &str, dir: &str, fstype: &str, opts: &str) -> &Self {
        let p = self.root.path("/proc/mounts");
        let mut text = fs::read_to_string(&p).unwrap();
        text.push_str(&format!("{dev} {dir} {fstype} {opts} 0 0\n"));
        fs::write(p, text).unwrap();
        self
    }

    /// Kernel files, /proc/cpuinfo for `n` CPUs, cpu lists, topology (`smt` threads per
    /// core), hotplug files for CPUs >= `first_hotplug`, and a hotplug state table.
    pub fn machine(&self, model: &str, flags: &str, n: u32, smt: u32, first_hotplug: u32) -> &Self {
        self.put("/proc/sys/kernel/osrelease", "6.18.0-test\n");
        self.put("/proc/sys/kernel/version", "#1 SMP PREEMPT\n");
        self.put("/proc/cmdline", "console=ttyS0 quiet\n");
        self.put("/sys/kernel/rcu_expedited", "0\n");
        let mut info = String::new();
        for c in 0..n {
            info.push_str(&format!(
                "processor\t: {c}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n\
                 model name\t: {model}\nstepping\t: 8\nflags\t\t: {flags}\n\n"
            ));
        }
        self.put("/proc/cpuinfo", &info);
        let all = if n == 1 {
            "0\n".to_string()
        } else {
            format!("0-{}\n", n - 1)
        };
        for f in ["possible", "present", "online"] {
            self.put(&format!("{CPU}/{f}"), &all);
        }
        self.put(&format!("{CPU}/offline"), "\n");
        for c in 0..n {
            let t = format!("{CPU}/cpu{c}/topology");
            let core = c / smt;
            let sib: Vec<String> = (core * smt..core * smt + smt)
                .map(|x| x.to_string())
                .collect();
            self.put(&format!("{t}/physical_package_id"), "0\n");
            self.put(&format!("{t}/die_id"), "0\n");
            self.put(&format!("{t}/cluster_id"), "65535\n");
            self.put(&format!("{t}/core_id"), &format!("{core}\n"));
            self.put(&format!("{t}/thread_siblings_list"), &sib.join(","));
            self.put(&format!("{t}/package_cpus_list"), &all);
            if c >= first_hotplug {
                self.put(&format!("{CPU}/cpu{c}/online"), "1\n");
            }
            self.put(&format!("{CPU}/cpu{c}/hotplug/state"), "235\n");
        }
        self.put(
            &format!("{CPU}/hotplug/states"),
            "  0: offline\n  1: threads:prepare\n 92: sched:active\n235: online\n",
        );
        self
    }

    /// cpuidle with `driver`, `governor` and states (name, desc, latency, residency)
    /// on every CPU; usage/time grow with the state index.
    pub fn cpuidle(
        &self,
        n: u32,
        driver: &str,
        governor: &str,
        avail: &str,
        states: &[(&str, &str, u64, u64)],
    ) -> &Self {
        let d = "/sys/devices/system/cpu/cpuidle";
        self.put(&format!("{d}/current_driver"), &format!("{driver}\n"));
        self.put(&format!("{d}/current_governor"), &format!("{governor}\n"));
        self.put(
            &format!("{d}/current_governor_ro"),
            &format!("{governor}\n"),
        );
        self.put(&format!("{d}/available_governors"), &format!("{avail} \n"));
        self.put("/sys/module/cpuidle/parameters/off", "0\n");
        for c in 0..n {
            for (k, (name, desc, lat, res)) in states.iter().enumerate() {
                let s = format!("{CPU}/cpu{c}/cpuidle/state{k}");
                let k = k as u64;
                for (f, v) in [
                    ("name", name.to_string()),
                    ("desc", desc.to_string()),
                    ("latency", lat.to_string()),
                    ("residency", res.to_string()),
                    ("usage", (100 * (k + 1) + c as u64).to_string()),
                    ("time", (10_000 * (k + 1)).to_string()),
                    ("above", k.to_string()),
                    ("below", (k * 2).to_string()),
                    ("rejected", "0".into()),
                    ("disable", "0".into()),
                    ("default_status", "enabled".into()),
                    ("power", "0".into()),
                ] {
                    self.put(&format!("{s}/{f}"), &format!("{v}\n"));
                }
            }
        }
        self
    }

    /// haltpoll's parameters at their defaults (`guest_halt_poll_ns` 200000), and the driver's `force`.
    pub fn haltpoll(&self, force: bool) -> &Self {
        let p = "/sys/module/haltpoll/parameters";
        self.put(&format!("{p}/guest_halt_poll_allow_shrink"), "Y\n");
        self.put(&format!("{p}/guest_halt_poll_grow"), "2\n");
        self.put(&format!("{p}/guest_halt_poll_grow_start"), "50000\n");
        self.put(&format!("{p}/guest_halt_poll_ns"), "200000\n");
        self.put(&format!("{p}/guest_halt_poll_shrink"), "2\n");
        self.put(
            "/sys/module/cpuidle_haltpoll/parameters/force",
            if force { "Y\n" } else { "N\n" },
        );
        self
    }

    /// intel_pstate in active mode: one policy per CPU, with EPP.
    pub fn intel_pstate(&self, n: u32) -> &Self {
        let d = "/sys/devices/system/cpu/cpufreq";
        self.put(&format!("{CPU}/intel_pstate/status"), "active\n");
        self.put(&format!("{CPU}/intel_pstate/no_turbo"), "0\n");
        for c in 0..n {
            let p = format!("{d}/policy{c}");
            for (f, v) in [
                ("affected_cpus", c.to_string()),
                ("related_cpus", c.to_string()),
                ("scaling_driver", "intel_pstate".into()),
                ("scaling_governor", "powersave".into()),
                (
                    "scaling_available_governors",
                    "performance powersave".into(),
                ),
                ("scaling_min_freq", "800000".into()),
                ("scaling_max_freq", "4800000".into()),
                ("scaling_cur_freq", "1200000".into()),
                ("cpuinfo_min_freq", "800000".into()),
                ("cpuinfo_max_freq", "4800000".into()),
                (
                    "energy_performance_preference",
                    "balance_performance".into(),
                ),
                (
                    "energy_performance_available_preferences",
                    "default performance balance_performance balance_power power".into(),
                ),
            ] {
                self.put(&format!("{p}/{f}"), &format!("{v}\n"));
            }
        }
        self
    }

    /// RAPL package-0 with core and dram subzones, plus the control-type directory.
    pub fn rapl(&self) -> &Self {
        let d = "/sys/class/powercap";
        self.put(&format!("{d}/intel-rapl/enabled"), "1\n");
        for (id, name, e) in [
            ("intel-rapl:0", "package-0", 123456789),
            ("intel-rapl:0:0", "core", 2345678),
            ("intel-rapl:0:1", "dram", 345678),
        ] {
            self.put(&format!("{d}/{id}/name"), &format!("{name}\n"));
            self.put(&format!("{d}/{id}/enabled"), "1\n");
            self.put(&format!("{d}/{id}/energy_uj"), &format!("{e}\n"));
            self.put(&format!("{d}/{id}/max_energy_range_uj"), "262143328850\n");
        }
        self
    }

    /// tracefs mounted at /sys/kernel/tracing, with an `instances` directory.
    pub fn tracefs_mounted(&self) -> &Self {
        self.mount("nodev", "/sys/kernel/tracing", "tracefs", "rw,relatime");
        self.mkdir("/sys/kernel/tracing/instances");
        self.put("/sys/kernel/tracing/events/enable", "0\n")
    }

    /// debugfs mounted, with `sched/features` holding `features`.
    pub fn debugfs_sched(&self, features: &str) -> &Self {
        self.mount("debugfs", "/sys/kernel/debug", "debugfs", "rw,relatime");
        self.put("/sys/kernel/debug/sched/features", &format!("{features}\n"))
    }

    /// Take `cpu` offline as the kernel shows it: `online` 0, the lists updated, and its
    /// topology directory gone. `n` is the number of CPUs.
    pub fn offline(&self, n: u32, cpu: u32) -> &Self {
        self.put(&format!("{CPU}/cpu{cpu}/online"), "0\n");
        let online: Vec<u32> = (0..n).filter(|c| *c != cpu).collect();
        self.put(
            &format!("{CPU}/online"),
            &crate::cpulist::format_cpu_list(&online),
        );
        self.put(&format!("{CPU}/offline"), &format!("{cpu}\n"));
        let _ = fs::remove_dir_all(self.root.path(&format!("{CPU}/cpu{cpu}/topology")));
        self
    }

    /// The clocksource directory: the current one and the available list.
    pub fn clocksource(&self, current: &str, avail: &str) -> &Self {
        let d = "/sys/devices/system/clocksource/clocksource0";
        self.put(&format!("{d}/current_clocksource"), &format!("{current}\n"));
        self.put(
            &format!("{d}/available_clocksource"),
            &format!("{avail} \n"),
        )
    }

    /// A virtio-balloon device (and a network device beside it), bound to its driver, with
    /// free page reporting negotiated or not.
    pub fn balloon(&self, reporting: bool) -> &Self {
        let bus = "/sys/bus/virtio/devices";
        let bits = |set: &[usize]| -> String {
            (0..64)
                .map(|i| if set.contains(&i) { '1' } else { '0' })
                .collect()
        };
        // A network device with bit 5 (its own meaning there) set: not a balloon.
        self.put(&format!("{bus}/virtio1/device"), "0x0001\n")
            .put(&format!("{bus}/virtio1/features"), &(bits(&[0, 5]) + "\n"))
            .mkdir(&format!("{bus}/virtio1/driver"));
        let balloon = if reporting {
            bits(&[1, 2, 5])
        } else {
            bits(&[1, 2])
        };
        self.put(&format!("{bus}/virtio0/device"), "0x0005\n")
            .put(&format!("{bus}/virtio0/features"), &(balloon + "\n"))
            .mkdir(&format!("{bus}/virtio0/driver"))
            .put(
                "/sys/module/page_reporting/parameters/page_reporting_order",
                "9\n",
            )
    }
}
