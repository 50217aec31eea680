//! Line charts as SVG, for the pictures in BENCHMARKS.md: the benches draw
//! them from their own numbers, so a picture and the table beside it come
//! from the same run. Plain SVG 1.1 text, no scripts and no fonts
//! embedded, so that a repository viewer shows it as it is.

use std::fmt::Write;

/// How an axis maps its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Powers of ten equally spaced: for what spans decades (hosts from 10
    /// to 10,000, lookups from a millisecond to a second).
    Log10,
}

#[derive(Debug, Clone)]
pub struct Axis {
    pub title: String,
    pub scale: Scale,
    /// The range shown; `None`: the data's, widened to round ticks.
    pub range: Option<(f64, f64)>,
}

impl Axis {
    pub fn new(title: &str, scale: Scale) -> Axis {
        Axis {
            title: title.to_string(),
            scale,
            range: None,
        }
    }

    pub fn range(mut self, low: f64, high: f64) -> Axis {
        self.range = Some((low, high));
        self
    }
}

/// How a series joins its points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// Straight lines with a dot at each point: measurements at a few sizes.
    Points,
    /// Steps, level until the next point: counts over time, distributions.
    Steps,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub join: Join,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: &str, join: Join, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.to_string(),
            join,
            points,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    /// One line under the title: what was run, where.
    pub note: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 440.0;
/// The plot area's margins: left for the y labels, bottom for the x ones.
const LEFT: f64 = 78.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 62.0;
const BOTTOM: f64 = 58.0;
/// Okabe and Ito's palette: told apart with any colour vision.
const COLOURS: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];

/// An axis placed on the page: its range in its scale's units and the
/// pixels it spans.
struct Placed {
    scale: Scale,
    low: f64,
    high: f64,
    from: f64,
    to: f64,
}

impl Placed {
    fn unit(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => v,
            Scale::Log10 => v.max(f64::MIN_POSITIVE).log10(),
        }
    }

    fn at(&self, v: f64) -> f64 {
        let (low, high) = (self.unit(self.low), self.unit(self.high));
        let span = if high > low { high - low } else { 1.0 };
        let f = ((self.unit(v) - low) / span).clamp(0.0, 1.0);
        self.from + f * (self.to - self.from)
    }
}

/// Round ticks covering `low..=high`: 1, 2 or 5 times a power of ten for
/// a linear axis (about six), the powers of ten for a log one.
pub fn ticks(scale: Scale, low: f64, high: f64) -> Vec<f64> {
    match scale {
        Scale::Log10 => {
            let first = low.max(f64::MIN_POSITIVE).log10().floor() as i32;
            let last = high.max(f64::MIN_POSITIVE).log10().ceil() as i32;
            (first..=last).map(|e| 10f64.powi(e)).collect()
        }
        Scale::Linear => {
            let raw = (high - low).max(f64::EPSILON) / 6.0;
            let power = 10f64.powf(raw.log10().floor());
            let m = [1, 2, 5, 10]
                .into_iter()
                .find(|m| f64::from(*m) * power >= raw)
                .unwrap_or(10);
            let step = f64::from(m) * power;
            // Whole multiples, scaled once: 3 × 0.2 is 0.6000000000000001,
            // 6 / 10 is 0.6.
            let at = |i: i64| match power < 1.0 {
                true => (i * i64::from(m)) as f64 / (1.0 / power).round(),
                false => (i * i64::from(m)) as f64 * power,
            };
            let start = (low / step).floor() as i64;
            let end = (high / step).ceil() as i64;
            (start..=end).map(at).collect()
        }
    }
}

/// A tick's label: no trailing zeros, thousands grouped (10,000).
pub fn label(v: f64) -> String {
    if v != 0.0 && v.abs() < 1.0 {
        let s = format!("{v:.6}");
        return s.trim_end_matches('0').to_string();
    }
    let whole = v.round() as i64;
    if (v - whole as f64).abs() > 1e-9 {
        return format!("{v:.1}");
    }
    let digits = whole.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if whole < 0 {
        out.insert(0, '-');
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Chart {
    /// The range an axis shows: its own, or the data's rounded out to
    /// ticks.
    fn extent(&self, axis: &Axis, pick: fn(&(f64, f64)) -> f64) -> (f64, f64) {
        if let Some(r) = axis.range {
            return r;
        }
        let values = self.series.iter().flat_map(|s| s.points.iter().map(pick));
        let values: Vec<f64> = match axis.scale {
            Scale::Log10 => values.filter(|v| *v > 0.0).collect(),
            Scale::Linear => values.collect(),
        };
        let low = values.iter().copied().fold(f64::INFINITY, f64::min);
        let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !low.is_finite() {
            return (0.0, 1.0);
        }
        let t = ticks(axis.scale, low, high);
        (t[0], t[t.len() - 1])
    }

    /// The chart as an SVG document.
    pub fn svg(&self) -> String {
        let (x0, x1) = self.extent(&self.x, |p| p.0);
        let (y0, y1) = self.extent(&self.y, |p| p.1);
        let x = Placed {
            scale: self.x.scale,
            low: x0,
            high: x1,
            from: LEFT,
            to: WIDTH - RIGHT,
        };
        let y = Placed {
            scale: self.y.scale,
            low: y0,
            high: y1,
            from: HEIGHT - BOTTOM,
            to: TOP,
        };
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
             viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"13\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
             <text x=\"{LEFT}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}</text>\n\
             <text x=\"{LEFT}\" y=\"44\" fill=\"#555\">{}</text>\n",
            escape(&self.title),
            escape(&self.note)
        );
        self.grid(&mut s, &x, &y);
        for (i, series) in self.series.iter().enumerate() {
            draw(&mut s, series, COLOURS[i % COLOURS.len()], &x, &y, i);
        }
        s.push_str("</svg>\n");
        s
    }

    /// Tick lines and labels of both axes, and their titles.
    fn grid(&self, s: &mut String, x: &Placed, y: &Placed) {
        let (top, bottom) = (TOP, HEIGHT - BOTTOM);
        for t in ticks(x.scale, x.low, x.high) {
            let px = x.at(t);
            let _ = writeln!(
                s,
                "<line x1=\"{px:.1}\" y1=\"{top}\" x2=\"{px:.1}\" y2=\"{bottom}\" stroke=\"#ddd\"/>\
                 <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                bottom + 18.0,
                label(t)
            );
        }
        for t in ticks(y.scale, y.low, y.high) {
            let py = y.at(t);
            let _ = writeln!(
                s,
                "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                x.to,
                LEFT - 6.0,
                py + 4.0,
                label(t)
            );
        }
        let middle_y = (top + bottom) / 2.0;
        let _ = writeln!(
            s,
            "<rect x=\"{LEFT}\" y=\"{top}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" \
             stroke=\"#888\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n\
             <text transform=\"translate(18 {middle_y:.1}) rotate(-90)\" \
             text-anchor=\"middle\">{}</text>",
            x.to - LEFT,
            bottom - top,
            (LEFT + x.to) / 2.0,
            HEIGHT - 14.0,
            escape(&self.x.title),
            escape(&self.y.title)
        );
    }
}

/// One series: its line, dots where it was measured, its legend entry.
fn draw(s: &mut String, series: &Series, colour: &str, x: &Placed, y: &Placed, i: usize) {
    let mut path: Vec<(f64, f64)> = Vec::new();
    for &(vx, vy) in &series.points {
        let p = (x.at(vx), y.at(vy));
        if series.join == Join::Steps {
            if let Some(&(_, last)) = path.last() {
                path.push((p.0, last));
            }
        }
        path.push(p);
    }
    let points: Vec<String> = path.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
    let _ = writeln!(
        s,
        "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
        points.join(" ")
    );
    if series.join == Join::Points {
        for &(vx, vy) in &series.points {
            let _ = writeln!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"/>",
                x.at(vx),
                y.at(vy)
            );
        }
    }
    let (lx, ly) = (WIDTH - RIGHT + 14.0, TOP + 10.0 + 22.0 * i as f64);
    let _ = writeln!(
        s,
        "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{:.1}\" y2=\"{ly}\" stroke=\"{colour}\" \
         stroke-width=\"3\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        lx + 22.0,
        lx + 28.0,
        ly + 4.0,
        escape(&series.name)
    );
}

/// The points of an empirical distribution of `sorted` (ascending), at
/// most `most` of them: (value, fraction of values at or below it).
pub fn cdf(sorted: &[f64], most: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(most.max(1)).max(1);
    let mut out: Vec<(f64, f64)> = (step - 1..n)
        .step_by(step)
        .map(|i| (sorted[i], (i + 1) as f64 / n as f64))
        .collect();
    if out.last().is_none_or(|p| p.1 < 1.0) {
        out.push((sorted[n - 1], 1.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(series: Vec<Series>, x: Scale) -> Chart {
        Chart {
            title: "Datagrams <per> host".into(),
            note: "a & b".into(),
            x: Axis::new("hosts", x),
            y: Axis::new("datagrams", Scale::Linear),
            series,
        }
    }

    #[test]
    fn each_series_is_a_line_and_a_legend_entry_in_its_own_colour() {
        let a = Series::new("sent", Join::Points, vec![(10.0, 9.0), (1000.0, 9.0)]);
        let b = Series::new(
            "received",
            Join::Steps,
            vec![(10.0, 30.0), (1000.0, 3000.0)],
        );
        let svg = chart(vec![a, b], Scale::Log10).svg();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 2, "dots for Points only");
        assert!(svg.contains(COLOURS[0]) && svg.contains(COLOURS[1]));
        assert!(svg.contains(">sent</text>") && svg.contains(">received</text>"));
        // Text is escaped, never markup.
        assert!(svg.contains("Datagrams &lt;per&gt; host") && svg.contains("a &amp; b"));
        // A log axis is labelled at its powers of ten.
        for t in [">10</text>", ">100</text>", ">1,000</text>"] {
            assert!(svg.contains(t), "{t}");
        }
    }

    #[test]
    fn points_land_where_their_values_are() {
        let x = Placed {
            scale: Scale::Log10,
            low: 10.0,
            high: 10_000.0,
            from: 100.0,
            to: 400.0,
        };
        assert_eq!(x.at(10.0), 100.0);
        assert_eq!(x.at(10_000.0), 400.0);
        assert!((x.at(100.0) - 200.0).abs() < 1e-9);
        let y = Placed {
            scale: Scale::Linear,
            low: 0.0,
            high: 1.0,
            from: 300.0,
            to: 100.0,
        };
        assert_eq!(y.at(0.5), 200.0);
        assert_eq!(y.at(7.0), 100.0, "clamped to the plot");
    }

    #[test]
    fn steps_hold_their_level_until_the_next_point() {
        let s = Series::new("n", Join::Steps, vec![(0.0, 0.0), (1.0, 1.0)]);
        let mut c = chart(vec![s], Scale::Linear);
        c.x.range = Some((0.0, 1.0));
        c.y.range = Some((0.0, 1.0));
        let svg = c.svg();
        let (l, r, t, b) = (LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM);
        let line = format!("points=\"{l:.1},{b:.1} {r:.1},{b:.1} {r:.1},{t:.1}\"");
        assert!(svg.contains(&line), "{svg}");
    }

    #[test]
    fn ticks_are_round_and_cover_the_data() {
        assert_eq!(
            ticks(Scale::Linear, 0.0, 1.0),
            [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        );
        assert_eq!(
            ticks(Scale::Linear, 3.0, 9.0),
            (3..=9).map(f64::from).collect::<Vec<_>>()
        );
        assert_eq!(ticks(Scale::Log10, 12.0, 900.0), [10.0, 100.0, 1000.0]);
        assert_eq!(label(10_000.0), "10,000");
        assert_eq!(label(0.05), "0.05");
        assert_eq!(label(2.5), "2.5");
        assert_eq!(label(-1500.0), "-1,500");
    }

    #[test]
    fn a_distribution_rises_to_one_at_its_largest_value() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let c = cdf(&v, 100);
        assert_eq!(c.len(), 100);
        assert_eq!(c[0], (10.0, 0.01));
        assert_eq!(c[c.len() - 1], (1000.0, 1.0));
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert_eq!(cdf(&[5.0], 100), [(5.0, 1.0)]);
        assert!(cdf(&[], 10).is_empty());
    }
}
