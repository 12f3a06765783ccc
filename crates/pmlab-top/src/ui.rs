//! The views of `pmlab top`: the terminal UI (ratatui on crossterm: per-CPU idle shares,
//! the wakeup table with a sort key, originators, kicks, power, pmlab's own wakeups) that
//! restores the terminal on every exit path, and the JSON lines view (one object per interval).

use crate::live::{Sample, View};
use pmlab_analysis::wakeups::CauseRow;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use ratatui::DefaultTerminal;
use serde_json::json;
use std::io::Write;

/// One JSON object per interval on a writer (stdout): the window, pmlab's own wakeups,
/// power, and the `idle`, `wakeups` and `kicks` sections as `pmlab analyze --json` prints them.
pub struct JsonView<W: Write> {
    out: W,
}

impl<W: Write> JsonView<W> {
    /// A view writing to `out`.
    pub fn new(out: W) -> JsonView<W> {
        JsonView { out }
    }
}

/// The JSON object of one interval.
pub fn sample_json(s: &Sample) -> serde_json::Value {
    let i = &s.interval;
    json!({
        "interval": i.index,
        "from_ns": i.from_ns,
        "to_ns": i.to_ns,
        "events": i.events,
        "late": i.late,
        "lost": i.lost,
        "own_wakeups_per_s": s.own_wakeups_per_s,
        "own_wakeups": s.own_wakeups,
        "power_w": s.power_w,
        "power_source": s.power_source,
        "idle_states": s.idle_states,
        "idle": i.report.idle,
        "wakeups": i.report.wakeups,
        "kicks": i.report.kicks,
    })
}

impl<W: Write> View for JsonView<W> {
    fn sample(&mut self, s: &Sample) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, &sample_json(s))?;
        writeln!(self.out)?;
        self.out.flush()
    }
}

/// The column the wakeup table is sorted by (`s` cycles through them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// Exits per second, most first.
    Rate,
    /// CPU, then rate.
    Cpu,
    /// Needless exits, most first.
    Needless,
    /// The cause's kind and detail.
    Cause,
}

impl SortBy {
    /// The next column.
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Rate => SortBy::Cpu,
            SortBy::Cpu => SortBy::Needless,
            SortBy::Needless => SortBy::Cause,
            SortBy::Cause => SortBy::Rate,
        }
    }
    fn label(self) -> &'static str {
        match self {
            SortBy::Rate => "exits/s",
            SortBy::Cpu => "cpu",
            SortBy::Needless => "needless",
            SortBy::Cause => "cause",
        }
    }
}

/// Sorts wakeup rows (per-CPU rows only) by `by`.
pub fn sort_causes(rows: &mut [&CauseRow], by: SortBy) {
    let rate = |r: &CauseRow| std::cmp::Reverse(r.exits);
    match by {
        SortBy::Rate => rows.sort_by_key(|r| (rate(r), r.cpu)),
        SortBy::Cpu => rows.sort_by_key(|r| (r.cpu, rate(r))),
        SortBy::Needless => rows.sort_by_key(|r| (std::cmp::Reverse(r.needless.needless), rate(r))),
        SortBy::Cause => rows.sort_by(|a, b| {
            (a.cause.kind, &a.cause.detail, a.cpu).cmp(&(b.cause.kind, &b.cause.detail, b.cpu))
        }),
    }
}

/// Puts the terminal back (raw mode off, main screen, cursor shown), for exits that skip
/// [`TerminalGuard`]'s Drop (a forced exit on a second signal).
pub fn restore_terminal() {
    ratatui::restore();
}

/// Puts the terminal back (raw mode off, main screen, cursor shown) when dropped: on `q`,
/// a signal, `--duration`'s end and errors; ratatui's panic hook does it on a panic.
pub struct TerminalGuard {
    terminal: DefaultTerminal,
}

impl TerminalGuard {
    /// Raw mode and the alternate screen, with ratatui's restoring panic hook installed.
    pub fn enter() -> std::io::Result<TerminalGuard> {
        let terminal = ratatui::try_init()?;
        Ok(TerminalGuard { terminal })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// The terminal UI.
pub struct TermView {
    guard: TerminalGuard,
    last: Option<Sample>,
    sort: SortBy,
}

impl TermView {
    /// Takes over the terminal (see [`TerminalGuard`]) and draws a waiting screen.
    pub fn new() -> std::io::Result<TermView> {
        let mut v = TermView {
            guard: TerminalGuard::enter()?,
            last: None,
            sort: SortBy::Rate,
        };
        v.draw()?;
        Ok(v)
    }

    fn draw(&mut self) -> std::io::Result<()> {
        let (last, sort) = (&self.last, self.sort);
        self.guard
            .terminal
            .draw(|f| frame(f, last.as_ref(), sort))?;
        Ok(())
    }
}

impl View for TermView {
    fn sample(&mut self, s: &Sample) -> std::io::Result<()> {
        self.last = Some(s.clone());
        self.draw()
    }
    fn wants_keys(&self) -> bool {
        true
    }
    fn key(&mut self, key: Option<KeyEvent>) -> std::io::Result<bool> {
        if let Some(k) = key {
            match k.code {
                KeyCode::Char('q') | KeyCode::Esc => return Ok(false),
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    return Ok(false)
                }
                KeyCode::Char('s') => self.sort = self.sort.next(),
                _ => return Ok(true),
            }
        }
        self.draw()?;
        Ok(true)
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn frame(f: &mut ratatui::Frame, s: Option<&Sample>, sort: SortBy) {
    let [head, cpus, causes, origins, keys] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(6),
        Constraint::Min(6),
        Constraint::Length(7),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(
        Line::from(format!(
            "keys: s sort wakeups (by {}), q quit",
            sort.label()
        ))
        .style(Style::new().add_modifier(Modifier::DIM)),
        keys,
    );
    let Some(s) = s else {
        f.render_widget(
            Paragraph::new("pmlab top: tracing; the first interval comes at the first refresh"),
            head,
        );
        return;
    };
    let i = &s.interval;
    let secs = (i.to_ns - i.from_ns) as f64 / 1e9;
    let power = match (&s.power_w, &s.power_source) {
        (Some(w), Some(src)) => format!("{w:.2} W ({src})"),
        _ => "n/a (no hwmon, RAPL)".into(),
    };
    f.render_widget(
        Paragraph::new(vec![
            Line::from(format!(
                "pmlab top  interval {}  {:.2} s  {} events  lost {}  power {power}",
                i.index, secs, i.events, i.lost
            )),
            Line::from(format!(
                "pmlab's own wakeups: {:.1}/s ({})",
                s.own_wakeups_per_s,
                s.own_wakeups
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(t, n)| format!("{t} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ]),
        head,
    );
    let r = &i.report;
    let idle = r.idle.as_ref().and_then(|o| o.done());
    let wake = r.wakeups.as_ref().and_then(|o| o.done());
    let kicks = r.kicks.as_ref().and_then(|o| o.done());
    let mut rows = Vec::new();
    for c in idle.map(|x| x.cpus.as_slice()).unwrap_or_default() {
        let states = c
            .states
            .iter()
            .map(|st| format!("{} {}", st.name, pct(st.share)))
            .collect::<Vec<_>>()
            .join("  ");
        // 0.0 + : an empty float sum is -0.0.
        let poll = 0.0
            + c.states
                .iter()
                .filter(|st| st.name.eq_ignore_ascii_case("poll"))
                .map(|st| st.share)
                .sum::<f64>();
        let w = wake.and_then(|w| w.cpus.iter().find(|x| x.cpu == c.cpu));
        let needless = match w.and_then(|w| w.needless) {
            Some(n) if n.exits > 0 => pct(n.needless as f64 / n.exits as f64),
            Some(_) => "-".into(),
            None => "unseen".into(),
        };
        let k = kicks.and_then(|k| k.cpus.iter().find(|x| x.cpu == c.cpu));
        rows.push(Row::new(vec![
            c.cpu.to_string(),
            pct(c.share),
            pct(poll),
            w.map_or("-".into(), |w| format!("{:.0}", w.per_s)),
            needless,
            k.map_or("0".into(), |k| format!("{:.1}", k.kicks_per_s)),
            states,
        ]));
    }
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(4),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(9),
                Constraint::Length(9),
                Constraint::Length(8),
                Constraint::Min(20),
            ],
        )
        .header(
            Row::new(vec![
                "CPU",
                "idle",
                "poll",
                "exits/s",
                "needless",
                "kicks/s",
                "idle by state",
            ])
            .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .block(Block::bordered().title("per CPU")),
        cpus,
    );
    let mut cause_rows: Vec<&CauseRow> = wake
        .map(|w| w.causes.iter().filter(|c| c.cpu != u32::MAX).collect())
        .unwrap_or_default();
    sort_causes(&mut cause_rows, sort);
    let rows: Vec<Row> = cause_rows
        .iter()
        .map(|c| {
            Row::new(vec![
                c.cpu.to_string(),
                format!("{:?}", c.cause.kind).to_lowercase(),
                c.cause.detail.clone(),
                format!("{:.1}", c.per_s),
                pct(c.share),
                if c.needless.exits > 0 {
                    c.needless.needless.to_string()
                } else {
                    "-".into()
                },
                c.origin
                    .as_ref()
                    .map_or(String::new(), |(o, n)| format!("{o} ({n})")),
            ])
        })
        .collect();
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(4),
                Constraint::Length(8),
                Constraint::Min(24),
                Constraint::Length(9),
                Constraint::Length(7),
                Constraint::Length(9),
                Constraint::Min(20),
            ],
        )
        .header(
            Row::new(vec![
                "CPU",
                "cause",
                "detail",
                "exits/s",
                "share",
                "needless",
                "top originator",
            ])
            .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .block(
            Block::bordered().title(format!("wakeups of idle CPUs (sorted by {})", sort.label())),
        ),
        causes,
    );
    let rows: Vec<Row> = wake
        .map(|w| {
            w.origins
                .iter()
                .filter(|o| o.cpu != u32::MAX)
                .take(5)
                .map(|o| {
                    Row::new(vec![
                        o.cpu.to_string(),
                        o.origin.clone(),
                        format!("{:.1}", o.exits as f64 / secs.max(1e-9)),
                        o.needless.needless.to_string(),
                    ])
                })
                .collect()
        })
        .unwrap_or_default();
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(4),
                Constraint::Min(24),
                Constraint::Length(9),
                Constraint::Length(9),
            ],
        )
        .header(
            Row::new(vec!["CPU", "task or IRQ waking it", "exits/s", "needless"])
                .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .block(Block::bordered().title("top originators")),
        origins,
    );
}
