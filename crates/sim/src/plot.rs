//! Plots of a sweep: one metric against the swept value, as SVG and PNG.
//!
//! When a scenario sweeps a parameter, `atmlab sim run` writes one plot per metric:
//! the metric's mean over the replications against the swept value, one line per
//! series, with a vertical bar for the 95% confidence interval where there is one.
//! [`plot_metric`] writes the same picture twice: an SVG, which is small, diffable and
//! byte-for-byte deterministic, and an 800×600 PNG, which any viewer shows.
//!
//! # Why the font is embedded
//!
//! Plotters' default text support (`ttf`, through font-kit) looks fonts up on the
//! system with fontconfig and FreeType. The machines that build and test atmlab are
//! fresh Debian installs without those development packages and without network, so
//! the PNG must not depend on them. Plotters is therefore built without default
//! features and with `ab_glyph`, and this module registers DejaVu Sans, embedded with
//! `include_bytes!` from `crates/sim/assets/` (Bitstream Vera licence, see
//! `assets/DejaVu-LICENSE.txt`), as the `sans-serif` family before drawing. The SVG
//! only names the family in its `<text>` elements; the embedded font is used there to
//! measure the text, so the layout is the same on every machine.
//!
//! # Why the PNG is made here
//!
//! Plotters' `ab_glyph` text code drops each glyph's left side bearing, which spaces
//! digits and letters visibly wrong ("0.0 1"); the PNG is therefore drawn on a thin
//! wrapper of plotters' bitmap backend that places the glyphs itself, with the same
//! font and layout (`GlyphBitMap`). And plotters' `bitmap_encoder` feature pulls in
//! the whole `image` crate to save a file, so the RGB buffer is encoded here with the
//! `png` crate, which keeps the dependency tree small.
//!
//! # What is drawn
//!
//! Points whose x or mean is not finite are skipped, and on a logarithmic y axis so
//! are points whose mean is not positive; a confidence half-width that is NaN,
//! infinite, negative or zero draws no bar. The axis ranges cover the kept points and
//! their bars with a margin, and stay usable for a single point or equal values
//! (values near the limits of `f64` are clipped, see `AXIS_LIMIT`). A legend is
//! drawn when there is more than one series, in the corner where it hides the least
//! data (`legend_position`). A plot with nothing left to draw still has its title,
//! axes and a "no data" note, so that a sweep of failed runs produces pictures rather
//! than an error.

use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ab_glyph::FontRef;

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::SimError;
use glyph_bitmap::GlyphBitMap;

/// DejaVu Sans 2.37, the text face of every plot (see the module doc for why it is
/// embedded rather than looked up on the system).
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// The family name the font is registered under. It is the name plotters uses for
/// its own default text (tick labels, legends), so nothing falls back to a family
/// that is not registered.
const FONT_FAMILY: &str = "sans-serif";

/// Width of the PNG, and of the SVG's view box, in pixels.
pub const WIDTH: u32 = 800;
/// Height of the PNG, and of the SVG's view box, in pixels.
pub const HEIGHT: u32 = 600;

/// Line colours, one per series in turn: the "tab10" palette, chosen because it is
/// widely used for categorical data and its colours stay distinct for most readers.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line on a plot: a label and points (x, mean, ci95 half-width; ci95 may be NaN = no bar).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend text of this line (shown only when a plot has more than one series).
    pub label: String,
    /// The points as (swept value, mean of the metric, half-width of its 95% confidence
    /// interval). They are drawn in the order given, so give them sorted by x.
    pub points: Vec<(f64, f64, f64)>,
}

/// What a plot says about itself: its title, axis labels and y scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlotSpec<'a> {
    /// The title above the plot, e.g. the metric's name.
    pub title: &'a str,
    /// The x axis label, e.g. the swept parameter's key.
    pub x_label: &'a str,
    /// The y axis label, e.g. the metric with its unit.
    pub y_label: &'a str,
    /// Whether the y axis is logarithmic (for loss ratios and other values spanning
    /// decades); points with a non-positive mean are then left out.
    pub log_y: bool,
}

/// Writes `<stem>.svg` and `<stem>.png` (800x600). Errors map to `crate::SimError::Model { model: "plot".into(), message }`.
///
/// The extensions are appended to `stem`, not substituted, so a stem such as
/// `out/load=0.5` gives `out/load=0.5.svg`. The parent directory is created if it is
/// missing. The same arguments always give byte-identical files.
pub fn plot_metric(stem: &Path, spec: &PlotSpec<'_>, series: &[Series]) -> Result<(), SimError> {
    let font = font()?;
    let data = Prepared::new(spec.log_y, series);

    // Both renderings are made in memory first, so that a drawing error leaves no
    // half-written file behind and every I/O error can name its path.
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, spec, &data).map_err(|e| plot_error(format!("drawing the SVG: {e}")))?;
        root.present()
            .map_err(|e| plot_error(format!("drawing the SVG: {e}")))?;
    }

    let mut rgb = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
    {
        let bitmap = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT));
        let root = GlyphBitMap {
            inner: bitmap,
            font,
        }
        .into_drawing_area();
        draw(&root, spec, &data).map_err(|e| plot_error(format!("drawing the PNG: {e}")))?;
        root.present()
            .map_err(|e| plot_error(format!("drawing the PNG: {e}")))?;
    }
    let png = encode_png(&rgb)?;

    if let Some(parent) = stem.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| plot_error(format!("creating {}: {e}", parent.display())))?;
    }
    for (ext, bytes) in [("svg", svg.as_bytes()), ("png", png.as_slice())] {
        let path = with_appended_extension(stem, ext);
        std::fs::write(&path, bytes)
            .map_err(|e| plot_error(format!("writing {}: {e}", path.display())))?;
    }
    Ok(())
}

/// The error every failure of this module becomes, as the crate's API asks.
fn plot_error(message: String) -> SimError {
    SimError::Model {
        model: "plot".into(),
        message,
    }
}

/// Registers the embedded font with plotters once per process and returns it parsed
/// for [`GlyphBitMap`]. Plotters keeps fonts in a global table, and registering on
/// every call would only re-parse the same bytes.
fn font() -> Result<&'static FontRef<'static>, SimError> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| {
        register_font(FONT_FAMILY, FontStyle::Normal, FONT_BYTES).ok()?;
        FontRef::try_from_slice(FONT_BYTES).ok()
    })
    .as_ref()
    .ok_or_else(|| plot_error("the embedded font DejaVuSans.ttf could not be parsed".into()))
}

/// `stem` with `.ext` appended (rather than replacing whatever follows its last dot,
/// as `Path::with_extension` would).
fn with_appended_extension(stem: &Path, ext: &str) -> PathBuf {
    let mut s = OsString::from(stem.as_os_str());
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// Encodes an 8-bit RGB buffer of `WIDTH`×`HEIGHT` pixels as PNG. The encoder's
/// settings are fixed, so the same pixels always give the same bytes.
fn encode_png(rgb: &[u8]) -> Result<Vec<u8>, SimError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder
        .write_header()
        .map_err(|e| plot_error(format!("encoding the PNG: {e}")))?;
    writer
        .write_image_data(rgb)
        .map_err(|e| plot_error(format!("encoding the PNG: {e}")))?;
    writer
        .finish()
        .map_err(|e| plot_error(format!("encoding the PNG: {e}")))?;
    Ok(out)
}

/// One point ready to draw: x, mean, and the bar's (low, high) if it has one.
type Point = (f64, f64, Option<(f64, f64)>);

/// The series after filtering, with the axis ranges that cover them. It is computed
/// once and drawn on both backends, so the SVG and the PNG show the same thing.
struct Prepared<'s> {
    /// Each series' label and kept points (a series may be left with none).
    series: Vec<(&'s str, Vec<Point>)>,
    /// The x axis range, margins included.
    x: Range<f64>,
    /// The y axis range, margins included; both ends positive when `log_y`.
    y: Range<f64>,
    /// Whether the y axis is logarithmic.
    log_y: bool,
    /// Whether any point was kept at all.
    any: bool,
}

impl<'s> Prepared<'s> {
    /// Filters the points (see the module doc) and computes the ranges.
    fn new(log_y: bool, series: &'s [Series]) -> Self {
        let kept: Vec<(&str, Vec<Point>)> = series
            .iter()
            .map(|s| {
                let points = s
                    .points
                    .iter()
                    .filter(|&&(x, m, _)| x.is_finite() && m.is_finite() && (!log_y || m > 0.0))
                    .map(|&(x, m, ci)| {
                        let bar = (ci.is_finite() && ci > 0.0).then_some((m - ci, m + ci));
                        // An interval can be finite while its ends overflow.
                        let bar = bar.filter(|&(lo, hi)| lo.is_finite() && hi.is_finite());
                        (x, m, bar)
                    })
                    .collect();
                (s.label.as_str(), points)
            })
            .collect();

        let xs = kept.iter().flat_map(|(_, p)| p.iter().map(|&(x, _, _)| x));
        // On a log axis a bar's lower end may be at or below zero; it cannot be shown
        // and must not widen the range, so only positive values count there.
        let ys = kept.iter().flat_map(|(_, p)| {
            p.iter().flat_map(|&(_, m, bar)| {
                let (lo, hi) = bar.unwrap_or((m, m));
                [m, lo, hi]
            })
        });
        let ys: Vec<f64> = ys.filter(|&y| !log_y || y > 0.0).collect();
        let x_bounds = min_max(xs);
        let any = x_bounds.is_some();

        let x = pad_linear(x_bounds.unwrap_or((0.0, 1.0)));
        let y = if log_y {
            pad_log(min_max(ys).unwrap_or((1.0, 10.0)))
        } else {
            pad_linear(min_max(ys).unwrap_or((0.0, 1.0)))
        };
        Prepared {
            series: kept,
            x,
            y,
            log_y,
            any,
        }
    }
}

/// The smallest and largest of some finite values, or `None` if there are none.
fn min_max(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values.into_iter().fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// The largest magnitude an axis end may have. Plotters computes tick positions from
/// the span `end - start`, and loops without end when that overflows to infinity, so
/// absurd values are clipped to a range whose span is still finite.
const AXIS_LIMIT: f64 = f64::MAX / 4.0;

/// A linear axis range around `[lo, hi]` with a 5% margin each side, so that markers
/// and bars at the ends are not cut by the frame. Equal ends (one point, or a flat
/// metric, up to rounding noise) get ±10% of the value, or ±1 around zero, so the
/// range is never empty and its ticks are distinct.
fn pad_linear((lo, hi): (f64, f64)) -> Range<f64> {
    let span = hi - lo;
    // The bounds are finite, so `span` is not NaN (it may be infinite: not flat).
    let flat = span <= lo.abs().max(hi.abs()) * 1e-12;
    let (lo, hi, pad) = if !flat {
        (lo, hi, span * 0.05)
    } else {
        // Centre on the middle so noise does not shift the picture.
        let mid = lo / 2.0 + hi / 2.0;
        (mid, mid, if mid == 0.0 { 1.0 } else { mid.abs() * 0.1 })
    };
    let (a, b) = ((lo - pad).max(-AXIS_LIMIT), (hi + pad).min(AXIS_LIMIT));
    if a < b { a..b } else { -AXIS_LIMIT..AXIS_LIMIT }
}

/// A logarithmic axis range around positive `[lo, hi]`: a margin of 5% of the span in
/// decades each side, and half a decade each side when the ends are equal.
fn pad_log((lo, hi): (f64, f64)) -> Range<f64> {
    let (l, h) = (lo.log10(), hi.log10());
    let span = h - l;
    let pad = if span > 1e-12 { span * 0.05 } else { 0.5 };
    // The clamps keep both ends positive and finite when the values are at the limits
    // of f64 (10^(l - pad) can underflow to 0, 10^(h + pad) overflow).
    let b = 10f64.powf(h + pad).min(AXIS_LIMIT);
    // Plotters counts the decades as ln(end / start) and loops about that many times
    // over usize, so the ratio must stay finite: at most LOG_DECADES decades are shown,
    // the top ones (values further down are cut at the frame).
    let a = 10f64
        .powf(l - pad)
        .max(f64::MIN_POSITIVE)
        .max(b / 10f64.powi(LOG_DECADES));
    if a < b { a..b } else { b / 10.0..b }
}

/// The most decades a logarithmic axis spans (see [`pad_log`]).
const LOG_DECADES: i32 = 300;

/// Draws the whole picture on one backend: frame, title, axes, bars, lines, legend.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    spec: &PlotSpec<'_>,
    data: &Prepared<'_>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(spec.title, (FONT_FAMILY, 24))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(88);
    let x_step = (data.x.end - data.x.start) / 10.0;
    let x_fmt = move |v: &f64| fmt_linear(*v, x_step);
    if data.log_y {
        let mut chart = builder
            .build_cartesian_2d(data.x.clone(), data.y.clone().log_scale())
            .map_err(|e| e.to_string())?;
        draw_in_chart(&mut chart, spec, data, &x_fmt, &|v: &f64| fmt_log(*v))
    } else {
        let y_step = (data.y.end - data.y.start) / 10.0;
        let mut chart = builder
            .build_cartesian_2d(data.x.clone(), data.y.clone())
            .map_err(|e| e.to_string())?;
        draw_in_chart(&mut chart, spec, data, &x_fmt, &move |v: &f64| {
            fmt_linear(*v, y_step)
        })
    }
}

/// Draws into a chart whose y coordinate is linear or logarithmic; one generic body so
/// the two scales cannot drift apart.
fn draw_in_chart<'a, DB, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    spec: &PlotSpec<'_>,
    data: &Prepared<'_>,
    x_fmt: &dyn Fn(&f64) -> String,
    y_fmt: &dyn Fn(&f64) -> String,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(spec.x_label)
        .y_desc(spec.y_label)
        .axis_desc_style((FONT_FAMILY, 18))
        .label_style((FONT_FAMILY, 14))
        .x_labels(10)
        .y_labels(10)
        .x_label_formatter(x_fmt)
        .y_label_formatter(y_fmt)
        // Only the major grid: the minor lines plotters adds by default make a small
        // PNG look grey without helping to read values off it.
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(220, 220, 220))
        .draw()
        .map_err(|e| e.to_string())?;

    if !data.any {
        let centre = (
            (data.x.start + data.x.end) / 2.0,
            if data.log_y {
                (data.y.start * data.y.end).sqrt()
            } else {
                (data.y.start + data.y.end) / 2.0
            },
        );
        let style = TextStyle::from((FONT_FAMILY, 20).into_font())
            .color(&RGBColor(120, 120, 120))
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Center,
            ));
        chart
            .draw_series(std::iter::once(Text::new("no data", centre, style)))
            .map_err(|e| e.to_string())?;
        return Ok(());
    }

    // A bar's end below a log axis is drawn to the bottom of the axis: the interval
    // reaches zero or below, which is exactly "off the bottom" on that scale.
    let floor = data.y.start;
    let legend = data.series.len() > 1;
    for (i, (label, points)) in data.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let bars = points.iter().filter_map(|&(x, m, bar)| {
            bar.map(|(lo, hi)| {
                let lo = if data.log_y && lo <= 0.0 { floor } else { lo };
                ErrorBar::new_vertical(x, lo, m, hi, colour.stroke_width(1), 8)
            })
        });
        chart.draw_series(bars).map_err(|e| e.to_string())?;

        // Each marker shape is its own element type; plotters cannot compose boxed
        // (dynamic) elements with a non-'static backend, so the shape is chosen here
        // and the generic function below is instantiated once per shape.
        let label = legend.then_some(*label);
        let fill = colour.filled();
        // After ten series the colours repeat; the shape then shifts, so that no two
        // of the first forty series look the same.
        match (i / PALETTE.len() + i) % 4 {
            0 => draw_line(chart, points, colour, label, move || {
                Circle::new((0, 0), 4, fill)
            }),
            1 => draw_line(chart, points, colour, label, move || {
                Rectangle::new([(-4, -4), (4, 4)], fill)
            }),
            2 => draw_line(chart, points, colour, label, move || {
                TriangleMarker::new((0, 0), 5, fill)
            }),
            _ => draw_line(chart, points, colour, label, move || {
                Cross::new((0, 0), 4, colour.stroke_width(2))
            }),
        }?;
    }

    if legend {
        chart
            .configure_series_labels()
            .position(legend_position(data))
            .label_font((FONT_FAMILY, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .margin(10)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The corner of the plot where the legend hides the least data.
///
/// A fixed corner covers data often enough to matter: a loss ratio that rises with
/// the load ends top right, a throughput that falls ends bottom right. So each corner
/// is scored by how many samples of the drawn lines, markers and bars fall under a
/// legend-sized box there, and the emptiest wins (ties in a fixed order, so the choice
/// is deterministic).
fn legend_position(data: &Prepared<'_>) -> SeriesLabelPosition {
    // The plot area is about 680×470 pixels; a legend row is about 20 pixels high, a
    // label about 8 pixels per character wide plus some 60 for its sample line and
    // padding. A rough box is enough to tell an empty corner from a busy one.
    let rows = data.series.len() as f64;
    let chars = data
        .series
        .iter()
        .map(|(label, _)| label.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let (w, h) = (
        ((60.0 + 8.0 * chars) / 680.0).min(1.0),
        ((20.0 + 20.0 * rows) / 470.0).min(1.0),
    );

    let nx = |x: f64| (x - data.x.start) / (data.x.end - data.x.start);
    let ny = |y: f64| {
        if data.log_y {
            let y = y.max(data.y.start);
            (y.log10() - data.y.start.log10()) / (data.y.end.log10() - data.y.start.log10())
        } else {
            (y - data.y.start) / (data.y.end - data.y.start)
        }
    };
    let mut samples = Vec::new();
    for (_, points) in &data.series {
        for &(x, m, bar) in points {
            samples.push((nx(x), ny(m)));
            if let Some((lo, hi)) = bar {
                samples.push((nx(x), ny(lo)));
                samples.push((nx(x), ny(hi)));
            }
        }
        for pair in points.windows(2) {
            let ((x0, y0), (x1, y1)) = (
                (nx(pair[0].0), ny(pair[0].1)),
                (nx(pair[1].0), ny(pair[1].1)),
            );
            for k in 1..16 {
                let t = f64::from(k) / 16.0;
                samples.push((x0 + (x1 - x0) * t, y0 + (y1 - y0) * t));
            }
        }
    }

    let corners = [
        (
            SeriesLabelPosition::UpperRight,
            (1.0 - w, 1.0 - h),
            (1.0, 1.0),
        ),
        (SeriesLabelPosition::UpperLeft, (0.0, 1.0 - h), (w, 1.0)),
        (SeriesLabelPosition::LowerRight, (1.0 - w, 0.0), (1.0, h)),
        (SeriesLabelPosition::LowerLeft, (0.0, 0.0), (w, h)),
    ];
    let mut best = (SeriesLabelPosition::UpperRight, usize::MAX);
    for (position, (x0, y0), (x1, y1)) in corners {
        let covered = samples
            .iter()
            .filter(|&&(x, y)| x >= x0 && x <= x1 && y >= y0 && y <= y1)
            .count();
        if covered < best.1 {
            best = (position, covered);
        }
    }
    best.0
}

/// Draws one series' line and its point markers, made by `marker` relative to each
/// point, and registers its legend entry when `label` is given. The marker's shape
/// changes with the series as well as its colour, so lines stay apart in grey print
/// and for colour-blind readers.
fn draw_line<'a, DB, Y, M>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    points: &[Point],
    colour: RGBColor,
    label: Option<&str>,
    marker: impl Fn() -> M + Copy + 'a,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    Y: Ranged<ValueType = f64>,
    M: Drawable<DB> + 'a,
    for<'b> &'b M: PointCollection<'b, (i32, i32)>,
{
    let line = chart
        .draw_series(LineSeries::new(
            points.iter().map(|&(x, m, _)| (x, m)),
            colour.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?;
    if let Some(label) = label {
        line.label(label).legend(move |(x, y)| {
            let stroke = PathElement::new(vec![(-10, 0), (10, 0)], colour.stroke_width(2));
            // Named explicitly: with `M: Drawable<DB>` in scope, `+` alone would
            // infer the right-hand side to be `M`.
            std::ops::Add::<PathElement<(i32, i32)>>::add(EmptyElement::at((x + 10, y)), stroke)
                + marker()
        });
    }
    chart
        .draw_series(
            points
                .iter()
                .map(|&(x, m, _)| EmptyElement::at((x, m)) + marker()),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// A tick label on a linear axis whose ticks are about `step` apart: as many decimals
/// as the step needs, no trailing zeros, and scientific notation for very large or
/// very small magnitudes. Plotters' own formatter prints at least one decimal and
/// never switches to scientific notation, which gives labels like "12000000.0".
fn fmt_linear(v: f64, step: f64) -> String {
    if v == 0.0 || v.abs() < step.abs() * 1e-9 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return fmt_sci(v);
    }
    let decimals = if step > 0.0 && step.is_finite() {
        // One decimal more than the step's leading digit needs, for steps like 0.25.
        (1.0 - step.log10().floor()).clamp(0.0, 9.0) as usize
    } else {
        3
    };
    trim_zeros(format!("{v:.decimals$}"))
}

/// A tick label on a logarithmic axis, where ticks span decades: three significant
/// digits, scientific notation outside 0.001..1e6.
fn fmt_log(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e6).contains(&a) {
        return fmt_sci(v);
    }
    let decimals = (2.0 - a.log10().floor()).clamp(0.0, 9.0) as usize;
    trim_zeros(format!("{v:.decimals$}"))
}

/// `v` in scientific notation with up to three significant digits, e.g. "1.5e-6".
fn fmt_sci(v: f64) -> String {
    let s = format!("{v:.2e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => format!("{}e{exp}", trim_zeros(mantissa.to_string())),
        None => s,
    }
}

/// "1.500" → "1.5", "2.000" → "2"; strings without a decimal point are unchanged.
fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The PNG backend's text drawing, apart because plotters-backend's style traits
/// clash with plotters' own `Color` methods where both are in scope.
mod glyph_bitmap {
    use ab_glyph::{Font, FontRef, GlyphId, PxScale, ScaleFont};
    use plotters::prelude::{BitMapBackend, DrawingBackend};
    use plotters_backend::{
        BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
        text_anchor::{HPos, VPos},
    };

    /// The PNG backend: plotters' bitmap backend with its own text drawing.
    ///
    /// Plotters' `ab_glyph` text code (0.3.7) places each glyph's ink box at the pen
    /// position, dropping the glyph's left side bearing, and truncates the pen to whole
    /// pixels; the result reads "bu ffer 1 6" and "0.0 1". This backend draws text with the
    /// same font and the same layout box (so the picture is laid out exactly as the SVG
    /// is) but positions glyphs the way the font says. Everything else is the bitmap
    /// backend's.
    pub(super) struct GlyphBitMap<'a> {
        /// The backend that owns the pixels.
        pub(super) inner: BitMapBackend<'a>,
        /// The embedded font; text styles name "sans-serif", the only family registered.
        pub(super) font: &'static FontRef<'static>,
    }

    impl<'a> DrawingBackend for GlyphBitMap<'a> {
        type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

        fn get_size(&self) -> (u32, u32) {
            self.inner.get_size()
        }

        fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.ensure_prepared()
        }

        fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.present()
        }

        fn draw_pixel(
            &mut self,
            point: BackendCoord,
            color: BackendColor,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_pixel(point, color)
        }

        fn draw_line<S: BackendStyle>(
            &mut self,
            from: BackendCoord,
            to: BackendCoord,
            style: &S,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_line(from, to, style)
        }

        fn draw_rect<S: BackendStyle>(
            &mut self,
            upper_left: BackendCoord,
            bottom_right: BackendCoord,
            style: &S,
            fill: bool,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_rect(upper_left, bottom_right, style, fill)
        }

        fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
            &mut self,
            path: I,
            style: &S,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_path(path, style)
        }

        fn draw_circle<S: BackendStyle>(
            &mut self,
            center: BackendCoord,
            radius: u32,
            style: &S,
            fill: bool,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_circle(center, radius, style, fill)
        }

        fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
            &mut self,
            vert: I,
            style: &S,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.fill_polygon(vert, style)
        }

        fn blit_bitmap(
            &mut self,
            pos: BackendCoord,
            size: (u32, u32),
            src: &[u8],
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.blit_bitmap(pos, size, src)
        }

        fn estimate_text_size<S: BackendTextStyle>(
            &self,
            text: &str,
            style: &S,
        ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
            self.inner.estimate_text_size(text, style)
        }

        fn draw_text<S: BackendTextStyle>(
            &mut self,
            text: &str,
            style: &S,
            pos: BackendCoord,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            let color = style.color();
            if color.alpha == 0.0 {
                return Ok(());
            }
            // The anchoring is plotters' default (plotters-backend's `draw_text`), on the
            // layout box plotters uses everywhere else, so text lands where the layout
            // expects it.
            let ((min_x, min_y), (max_x, max_y)) = style
                .layout_box(text)
                .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
            let (width, height) = (max_x - min_x, max_y - min_y);
            let dx = match style.anchor().h_pos {
                HPos::Left => 0,
                HPos::Right => -width,
                HPos::Center => -width / 2,
            };
            let dy = match style.anchor().v_pos {
                VPos::Top => 0,
                VPos::Center => -height / 2,
                VPos::Bottom => -height,
            };
            let transform = style.transform();
            let (w, h) = self.get_size();

            let font = self.font;
            let scale = PxScale::from(style.size() as f32);
            let scaled = font.as_scaled(scale);
            // The baseline sits so that capital letters and digits are centred in the
            // layout box (about one em high): then a centred tick label is centred on its
            // tick, and a label anchored at its top clears the axis by the same margin as
            // one anchored at its bottom.
            let cap_height = font
                .outline(font.glyph_id('H'))
                .map_or(scaled.ascent(), |o| {
                    // ab_glyph's unscaled bounds may be y-up or y-down; the height is
                    // the same either way.
                    (o.bounds.max.y - o.bounds.min.y).abs() * scaled.v_scale_factor()
                });
            let baseline = (height as f32 + cap_height) / 2.0;

            let mut pen = 0.0f32;
            let mut prev: Option<GlyphId> = None;
            for c in text.chars() {
                let id = font.glyph_id(c);
                if let Some(p) = prev {
                    pen += scaled.kern(p, id);
                }
                prev = Some(id);
                let glyph = id.with_scale_and_position(scale, ab_glyph::point(pen, baseline));
                pen += scaled.h_advance(id);
                let Some(outline) = font.outline_glyph(glyph) else {
                    continue; // a space, or a glyph without ink
                };
                let bounds = outline.px_bounds();
                let mut result = Ok(());
                outline.draw(|gx, gy, coverage| {
                    if result.is_err() || coverage <= 0.0 {
                        return;
                    }
                    // Pixel bounds are whole numbers: the outline is already placed at
                    // the fractional pen position inside them.
                    let x = bounds.min.x as i32 + gx as i32;
                    let y = bounds.min.y as i32 + gy as i32;
                    let (x, y) = transform.transform(x + dx - min_x, y + dy - min_y);
                    let (x, y) = (pos.0 + x, pos.1 + y);
                    if x >= 0 && y >= 0 && (x as u32) < w && (y as u32) < h {
                        let alpha = color.alpha * f64::from(coverage.min(1.0));
                        result = self
                            .inner
                            .draw_pixel((x, y), BackendColor { alpha, ..color });
                    }
                });
                result?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(log_y: bool) -> PlotSpec<'static> {
        PlotSpec {
            title: "Cell loss ratio vs load",
            x_label: "offered load ρ",
            y_label: "cell loss ratio",
            log_y,
        }
    }

    fn two_series() -> Vec<Series> {
        vec![
            Series {
                label: "buffer 16".into(),
                points: vec![
                    (0.5, 1e-6, 5e-7),
                    (0.6, 1e-5, 2e-6),
                    (0.7, 1e-4, 3e-5),
                    (0.8, 1e-3, f64::NAN),
                    (0.9, 1e-2, 2e-3),
                ],
            },
            Series {
                label: "buffer 64".into(),
                points: vec![
                    (0.5, 1e-9, 2e-9),
                    (0.6, 3e-8, 1e-8),
                    (0.7, 2e-6, 5e-7),
                    (0.8, 1e-4, 4e-5),
                    (0.9, 4e-3, 1e-3),
                ],
            },
        ]
    }

    fn path(stem: &Path, ext: &str) -> PathBuf {
        with_appended_extension(stem, ext)
    }

    /// Decodes a PNG fully and returns its size.
    fn png_size(bytes: &[u8]) -> (u32, u32) {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().expect("PNG header");
        let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
        let info = reader.next_frame(&mut buf).expect("PNG data");
        (info.width, info.height)
    }

    #[test]
    fn writes_svg_and_png() {
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("clr");
        plot_metric(&stem, &spec(true), &two_series()).unwrap();

        let png = std::fs::read(path(&stem, "png")).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert_eq!(png_size(&png), (WIDTH, HEIGHT));

        let svg = std::fs::read_to_string(path(&stem, "svg")).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("Cell loss ratio vs load"));
        assert!(svg.contains("offered load ρ"));
        assert!(svg.contains("cell loss ratio"));
        assert!(svg.contains("buffer 16") && svg.contains("buffer 64"));
    }

    #[test]
    fn output_is_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        plot_metric(&a, &spec(false), &two_series()).unwrap();
        plot_metric(&b, &spec(false), &two_series()).unwrap();
        for ext in ["svg", "png"] {
            let (x, y) = (
                std::fs::read(path(&a, ext)).unwrap(),
                std::fs::read(path(&b, ext)).unwrap(),
            );
            assert!(x == y, "{ext} differs between two runs");
        }
    }

    #[test]
    fn single_series_has_no_legend() {
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("one");
        let one = vec![Series {
            label: "only-series-label".into(),
            points: vec![(1.0, 2.0, 0.1), (2.0, 3.0, 0.2)],
        }];
        plot_metric(&stem, &spec(false), &one).unwrap();
        let svg = std::fs::read_to_string(path(&stem, "svg")).unwrap();
        assert!(!svg.contains("only-series-label"));
    }

    #[test]
    fn degenerate_inputs_do_not_fail() {
        let dir = tempfile::tempdir().unwrap();
        let cases: Vec<(&str, bool, Vec<Series>)> = vec![
            ("empty", false, vec![]),
            (
                "single",
                false,
                vec![Series {
                    label: "s".into(),
                    points: vec![(3.0, 7.0, 0.5)],
                }],
            ),
            (
                "single_log",
                true,
                vec![Series {
                    label: "s".into(),
                    points: vec![(3.0, 7.0, 9.0)],
                }],
            ),
            (
                "flat_zero",
                false,
                vec![Series {
                    label: "s".into(),
                    points: vec![(1.0, 0.0, f64::NAN), (1.0, 0.0, f64::NAN)],
                }],
            ),
            (
                "nan",
                false,
                vec![Series {
                    label: "s".into(),
                    points: vec![
                        (f64::NAN, 1.0, 0.1),
                        (1.0, f64::NAN, 0.1),
                        (2.0, 3.0, f64::INFINITY),
                        (3.0, 4.0, -1.0),
                    ],
                }],
            ),
            (
                "all_nan",
                false,
                vec![Series {
                    label: "s".into(),
                    points: vec![(f64::NAN, f64::NAN, f64::NAN)],
                }],
            ),
            (
                "log_nonpositive",
                true,
                vec![
                    Series {
                        label: "a".into(),
                        points: vec![(0.0, 0.0, 1.0), (1.0, -3.0, 1.0)],
                    },
                    Series {
                        label: "b".into(),
                        points: vec![(0.0, 1e-3, 0.1), (1.0, 1e-2, 0.0)],
                    },
                ],
            ),
            (
                "huge",
                false,
                vec![Series {
                    label: "s".into(),
                    points: vec![(0.0, f64::MAX, f64::MAX), (1.0, -f64::MAX, 1.0)],
                }],
            ),
            // Plotters loops (practically) forever on an axis whose span overflows;
            // these must finish quickly.
            (
                "huge_log",
                true,
                vec![Series {
                    label: "s".into(),
                    points: vec![(0.0, 5e-324, 1.0), (1.0, f64::MAX, 1.0)],
                }],
            ),
            (
                "huge_x",
                false,
                vec![Series {
                    label: "s".into(),
                    points: vec![(-f64::MAX, 1.0, 0.1), (f64::MAX, 2.0, 0.1)],
                }],
            ),
        ];
        for (name, log_y, series) in cases {
            let stem = dir.path().join(name);
            plot_metric(&stem, &spec(log_y), &series).unwrap_or_else(|e| panic!("{name}: {e}"));
            let png = std::fs::read(path(&stem, "png")).unwrap();
            assert_eq!(png_size(&png), (WIDTH, HEIGHT), "{name}");
        }
    }

    #[test]
    fn extension_is_appended_and_parent_created() {
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("nested/deeper/load=0.5");
        plot_metric(&stem, &spec(false), &two_series()).unwrap();
        assert!(dir.path().join("nested/deeper/load=0.5.svg").is_file());
        assert!(dir.path().join("nested/deeper/load=0.5.png").is_file());
    }

    #[test]
    fn unwritable_path_is_a_model_error() {
        let dir = tempfile::tempdir().unwrap();
        // A regular file where a directory is needed.
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let err = plot_metric(&file.join("stem"), &spec(false), &two_series()).unwrap_err();
        match err {
            SimError::Model { model, message } => {
                assert_eq!(model, "plot");
                assert!(message.contains("file"), "{message}");
            }
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[test]
    fn legend_avoids_the_data() {
        let rising = two_series();
        let data = Prepared::new(true, &rising);
        assert!(matches!(
            legend_position(&data),
            SeriesLabelPosition::UpperLeft
        ));
        let falling: Vec<Series> = rising
            .iter()
            .map(|s| Series {
                label: s.label.clone(),
                points: s.points.iter().map(|&(x, m, c)| (-x, m, c)).collect(),
            })
            .collect();
        let data = Prepared::new(true, &falling);
        assert!(matches!(
            legend_position(&data),
            SeriesLabelPosition::UpperRight
        ));
    }

    #[test]
    fn ranges_have_margins() {
        assert_eq!(pad_linear((0.0, 10.0)), -0.5..10.5);
        assert_eq!(pad_linear((5.0, 5.0)), 4.5..5.5);
        assert_eq!(pad_linear((0.0, 0.0)), -1.0..1.0);
        let r = pad_log((1.0, 1.0));
        assert!((r.start - 10f64.powf(-0.5)).abs() < 1e-12);
        assert!((r.end - 10f64.powf(0.5)).abs() < 1e-12);
        let r = pad_log((1e-6, 1e-2));
        assert!(r.start < 1e-6 && r.end > 1e-2);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(fmt_linear(0.2, 0.1), "0.2");
        assert_eq!(fmt_linear(0.25, 0.05), "0.25");
        assert_eq!(fmt_linear(3.0, 1.0), "3");
        assert_eq!(fmt_linear(1000.0, 200.0), "1000");
        assert_eq!(fmt_linear(0.30000000000000004, 0.1), "0.3");
        assert_eq!(fmt_linear(1.2e7, 1e6), "1.2e7");
        assert_eq!(fmt_linear(1e-17, 0.1), "0");
        assert_eq!(fmt_log(1e-6), "1e-6");
        assert_eq!(fmt_log(0.02), "0.02");
        assert_eq!(fmt_log(500.0), "500");
        assert_eq!(fmt_sci(-1.5e-9), "-1.5e-9");
    }

    /// Writes example plots for a person to look at (the PNG is what a reader of a
    /// sweep sees, and only a look tells whether the text renders and reads well):
    /// `cargo test -p atmlab-sim plot::tests::examples -- --ignored`, then open
    /// `$ATMLAB_PLOT_EXAMPLES/plot-example*.png` (default: the system temp directory).
    #[test]
    #[ignore = "writes files for a person to look at"]
    fn examples() {
        let dir = std::env::var_os("ATMLAB_PLOT_EXAMPLES")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        plot_metric(&dir.join("plot-example"), &spec(true), &two_series()).unwrap();
        let delay = Series {
            label: "M/D/1".into(),
            points: (1..=9)
                .map(|i| {
                    let rho = f64::from(i) / 10.0;
                    let wait = rho / (2.0 * (1.0 - rho));
                    (rho, 1.0 + wait, 0.05 * (1.0 + wait))
                })
                .collect(),
        };
        let linear = PlotSpec {
            title: "Mean cell delay",
            x_label: "offered load ρ",
            y_label: "delay (cell times)",
            log_y: false,
        };
        plot_metric(&dir.join("plot-example-linear"), &linear, &[delay]).unwrap();
        plot_metric(&dir.join("plot-example-empty"), &linear, &[]).unwrap();
        let throughput = |label: &str, k: f64| Series {
            label: label.into(),
            points: (0..=10)
                .map(|i| {
                    let load = f64::from(i) / 10.0;
                    (load, 1.0 - (k * load).exp() / k.exp() * load, 0.02)
                })
                .collect(),
        };
        let falling = PlotSpec {
            title: "Carried traffic, several policies",
            x_label: "offered load",
            y_label: "carried / offered",
            log_y: false,
        };
        let policies = [
            throughput("FIFO", 1.0),
            throughput("early packet discard", 2.0),
            throughput("partial packet discard", 3.0),
            throughput("none", 4.0),
            throughput("CLP-based selective discard", 5.0),
        ];
        plot_metric(&dir.join("plot-example-legend"), &falling, &policies).unwrap();
    }
}
