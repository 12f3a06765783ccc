//! SVG building blocks for the HTML report: linear scales, tick choice, axes with grid lines,
//! a colour palette and escaping. Plots are plain inline SVG; hover text is SVG `<title>`.

use std::fmt::Write;

/// Colours of configurations, in order (the reference first); distinct in print and on screen.
pub const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

/// The colour of series `i`.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escape text for HTML/SVG content and attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A linear map from a data interval to a pixel interval.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    /// Start of the data interval.
    pub d0: f64,
    /// End of the data interval.
    pub d1: f64,
    /// Pixel of `d0`.
    pub r0: f64,
    /// Pixel of `d1`.
    pub r1: f64,
}

impl Scale {
    /// The map of `d0..d1` onto `r0..r1`; an empty or non-finite data interval is widened around its start.
    pub fn new(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        let (d0, d1) = if (d1 - d0).abs() < 1e-12 || !d0.is_finite() || !d1.is_finite() {
            let c = if d0.is_finite() { d0 } else { 0.0 };
            let pad = if c == 0.0 { 1.0 } else { c.abs() * 0.1 };
            (c - pad, c + pad)
        } else {
            (d0, d1)
        };
        Scale { d0, d1, r0, r1 }
    }
    /// The pixel of data value `v`.
    pub fn at(&self, v: f64) -> f64 {
        self.r0 + (v - self.d0) / (self.d1 - self.d0) * (self.r1 - self.r0)
    }
}

/// About `n` round tick values covering `[lo, hi]`.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo || hi.is_nan() || lo.is_nan() || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut v = Vec::new();
    let mut t = (lo / step).ceil() * step;
    while t <= hi + step * 1e-9 {
        v.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    v
}

/// A tick label: short, no trailing zeros.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    let s = if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') && !s.ends_with('M') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A data range padded so that points do not sit on the frame; `zero` includes 0.
pub fn range(values: impl IntoIterator<Item = f64>, zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    let pad = (hi - lo).abs() * 0.06;
    let pad = if pad == 0.0 {
        hi.abs().max(1.0) * 0.1
    } else {
        pad
    };
    (if zero && lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
}

/// One plot: a frame with margins, scales and accumulated SVG elements.
pub struct Plot {
    /// Width in pixels.
    pub width: f64,
    /// Height in pixels.
    pub height: f64,
    /// The x scale (inside the margins).
    pub x: Scale,
    /// The y scale (inside the margins, growing upwards).
    pub y: Scale,
    /// The SVG elements drawn so far.
    pub body: String,
    title: String,
}

/// Margins: left, right, top, bottom.
const M: (f64, f64, f64, f64) = (64.0, 16.0, 28.0, 48.0);

impl Plot {
    /// An empty plot titled `title`, of this size, over data ranges `xr` and `yr`.
    pub fn new(title: &str, width: f64, height: f64, xr: (f64, f64), yr: (f64, f64)) -> Plot {
        Plot {
            width,
            height,
            x: Scale::new(xr.0, xr.1, M.0, width - M.1),
            y: Scale::new(yr.0, yr.1, height - M.3, M.2),
            body: String::new(),
            title: title.to_string(),
        }
    }

    /// Left edge, right edge, top, bottom of the plotting area in pixels.
    pub fn area(&self) -> (f64, f64, f64, f64) {
        (M.0, self.width - M.1, M.2, self.height - M.3)
    }

    /// Y axis with grid lines and a label.
    pub fn y_axis(&mut self, label: &str) {
        let (l, r, t, b) = self.area();
        for v in ticks(self.y.d0, self.y.d1, 5) {
            let y = self.y.at(v);
            let _ = write!(
                self.body,
                r#"<line class="grid" x1="{l:.1}" x2="{r:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                l - 6.0,
                y + 4.0,
                tick_label(v)
            );
        }
        let _ = write!(
            self.body,
            r#"<line class="axis" x1="{l:.1}" x2="{l:.1}" y1="{t:.1}" y2="{b:.1}"/><text class="label" transform="translate(14,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (t + b) / 2.0,
            esc(label)
        );
    }

    /// Numeric X axis.
    pub fn x_axis(&mut self, label: &str) {
        let (l, r, _, b) = self.area();
        for v in ticks(self.x.d0, self.x.d1, 6) {
            let x = self.x.at(v);
            let _ = write!(
                self.body,
                r#"<line class="axis" x1="{x:.1}" x2="{x:.1}" y1="{b:.1}" y2="{:.1}"/><text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                b + 4.0,
                b + 17.0,
                tick_label(v)
            );
        }
        self.x_line_and_label(l, r, b, label);
    }

    /// Categorical X axis: label `i` at x = i.
    pub fn x_categories(&mut self, labels: &[String], label: &str) {
        let (l, r, _, b) = self.area();
        for (i, s) in labels.iter().enumerate() {
            let x = self.x.at(i as f64);
            let _ = write!(
                self.body,
                r#"<text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                b + 17.0,
                esc(&shorten(s, 18))
            );
        }
        self.x_line_and_label(l, r, b, label);
    }

    fn x_line_and_label(&mut self, l: f64, r: f64, b: f64, label: &str) {
        let _ = write!(
            self.body,
            r#"<line class="axis" x1="{l:.1}" x2="{r:.1}" y1="{b:.1}" y2="{b:.1}"/><text class="label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (l + r) / 2.0,
            self.height - 8.0,
            esc(label)
        );
    }

    /// A legend of (colour, name) at the top right.
    pub fn legend(&mut self, items: &[(String, &str)]) {
        let (_, r, t, _) = self.area();
        for (i, (name, c)) in items.iter().enumerate() {
            let y = t + 4.0 + i as f64 * 15.0;
            let _ = write!(
                self.body,
                r#"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{c}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                r - 10.0,
                y,
                r - 14.0,
                y + 9.0,
                esc(&shorten(name, 40))
            );
        }
    }

    /// The finished `<svg>` element.
    pub fn finish(self) -> String {
        format!(
            r#"<svg class="plot" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="{t}"><text class="ptitle" x="{:.1}" y="17">{t}</text>{}</svg>"#,
            M.0,
            self.body,
            w = self.width,
            h = self.height,
            t = esc(&self.title),
        )
    }
}

/// Cut a label to `max` characters.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(tick_label(2.50), "2.5");
        assert_eq!(tick_label(20000.0), "20k");
        assert_eq!(esc("a<b&\"c\""), "a&lt;b&amp;&quot;c&quot;");
        let s = Scale::new(0.0, 10.0, 0.0, 100.0);
        assert_eq!(s.at(5.0), 50.0);
    }
}
