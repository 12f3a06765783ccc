//! Governor replay on small hand-built traces with known answers.

use super::states::StateTable;
use super::*;
use crate::testutil::{Builder, EXIT};
use std::path::Path;

fn table(text: &str) -> StateTable {
    StateTable::from_toml(text, Path::new("t.toml")).unwrap()
}

const HALTPOLL: &str = "[[state]]\nname = \"POLL\"\nexit_latency_us = 0\ntarget_residency_us = 0\n\
                        [[state]]\nname = \"haltpoll\"\nexit_latency_us = 1\ntarget_residency_us = 1\n";

/// CPU 0 idles in state `state` for each of `lens` (µs), 20 µs apart.
fn trace(state: u64, lens: &[u64]) -> pmlab_trace::Trace {
    let mut b = Builder::new(1);
    let e = b.std_events();
    let mut t = 1_000;
    for &l in lens {
        e.idle(&mut b, t, 0, state);
        e.idle(&mut b, t + l * 1000, 0, EXIT);
        t += l * 1000 + 20_000;
    }
    b.build()
}

#[test]
fn ladder_over_the_recorded_table_reproduces_halts() {
    let t = table(HALTPOLL);
    let tr = trace(1, &[100, 300, 50, 2000]);
    let cfg = GovConfig {
        governor: Governor::Ladder,
        ..GovConfig::default()
    };
    let r = replay(&tr, &Options::default(), &cfg, &t, &t).unwrap();
    assert_eq!(r.periods, 4);
    assert_eq!(r.agreement_share, Some(1.0));
    let halt = &r.states[1];
    assert_eq!((halt.recorded.entries, halt.replayed.entries), (4, 4));
    assert_eq!(halt.replayed.wakes, 4);
    assert_eq!(r.replayed_latency.p50_ns, Some(1000));
}

#[test]
fn haltpoll_governor_polls_and_times_out_into_halt() {
    let t = table(HALTPOLL);
    // a 30 µs halt grows the window to 50 µs; then a 20 µs period is caught by polling and
    // a 400 µs one polls 50 µs, times out and halts
    let tr = trace(1, &[30, 20, 400]);
    let cfg = GovConfig {
        governor: Governor::Haltpoll,
        ..GovConfig::default()
    };
    let r = replay(&tr, &Options::default(), &cfg, &t, &t).unwrap();
    let poll = &r.states[0].replayed;
    let halt = &r.states[1].replayed;
    assert_eq!((poll.entries, poll.wakes), (2, 1));
    assert_eq!((halt.entries, halt.wakes), (2, 2));
    assert_eq!(r.poll_timeouts, 1);
    assert_eq!(poll.time_ns, 20_000 + 50_000);
    // the recorded halts in state 1: the replay chose POLL for one of them
    assert_eq!(r.agreement[0].same, 2);
}

#[test]
fn a_pm_qos_limit_of_zero_keeps_every_governor_polling() {
    let t = table(HALTPOLL);
    let tr = trace(1, &[100, 100]);
    for g in [
        Governor::Menu,
        Governor::Teo,
        Governor::Ladder,
        Governor::Haltpoll,
    ] {
        let cfg = GovConfig {
            governor: g,
            latency_limit: Some(Nanos(0)),
            ..GovConfig::default()
        };
        let r = replay(&tr, &Options::default(), &cfg, &t, &t).unwrap();
        assert_eq!(r.states[1].replayed.entries, 0, "{g:?}");
        assert!(r.states[0].replayed.entries >= 2, "{g:?}");
    }
}

#[test]
fn energy_where_powers_are_given_and_the_tick_splits_a_kept_tick() {
    let t = table(
        "[[state]]\nname = \"C1\"\nexit_latency_us = 1\ntarget_residency_us = 1\npower_mw = 100\n\
         [[state]]\nname = \"C6\"\nexit_latency_us = 100\ntarget_residency_us = 500\npower_mw = 10\n",
    );
    let tr = trace(1, &[10_000]);
    let cfg = GovConfig {
        governor: Governor::Ladder,
        tick: TickMode::Periodic,
        ..GovConfig::default()
    };
    let r = replay(&tr, &Options::default(), &cfg, &t, &t).unwrap();
    // a 10 ms period under a periodic 4 ms tick is cut at least twice
    assert!(r.tick_wakeups_added >= 2, "{}", r.tick_wakeups_added);
    let e = r.energy_mj.1.unwrap();
    assert!(e > 0.0 && e <= 100.0 * 10e-3, "{e}");
    assert!(r.energy_mj.0.is_some());
}

#[test]
fn bad_input_is_refused_with_what_to_do() {
    let t = table(HALTPOLL);
    let tr = trace(1, &[100]);
    let cfg = GovConfig {
        governor: Governor::Teo,
        kernel: "5.0".parse().unwrap(),
        ..GovConfig::default()
    };
    let e = replay(&tr, &Options::default(), &cfg, &t, &t).unwrap_err();
    assert!(matches!(e, GovReplayError::NotInKernel { .. }));
    assert!(e.to_string().contains("appeared in 5.1"), "{e}");
    // a trace without cpu_idle: the message names the event to record
    let mut b = Builder::new(1);
    let ev = b.std_events();
    ev.switch(&mut b, 10, 0, (0, "swapper", 0), (5, "a"));
    ev.switch(&mut b, 90, 0, (5, "a", 1), (0, "swapper"));
    ev.switch(&mut b, 190, 0, (0, "swapper", 0), (5, "a"));
    let e = replay(
        &b.build(),
        &Options::default(),
        &GovConfig::default(),
        &t,
        &t,
    )
    .unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("power:cpu_idle") && m.contains("pmlab record"),
        "{m}"
    );
    // haltpoll on a table without a polling state 0
    let arm = table("[[state]]\nname = \"WFI\"\nexit_latency_us = 1\ntarget_residency_us = 1\n");
    let cfg = GovConfig {
        governor: Governor::Haltpoll,
        ..GovConfig::default()
    };
    assert!(matches!(
        replay(&tr, &Options::default(), &cfg, &arm, &arm),
        Err(GovReplayError::NotHaltpollTable(_))
    ));
    assert!("6.18.0-rc2".parse::<KernelVersion>().is_ok());
    assert!("x".parse::<KernelVersion>().is_err());
    assert!("bogus".parse::<Governor>().is_err());
}
