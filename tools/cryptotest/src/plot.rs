//! Throughput plots for `cryptotest --plot FILE.svg|FILE.png`.
//!
//! Draws throughput (Mb/s) against operand size (bytes), both on log scales, one line with point
//! markers per driver/algorithm pair, and a legend to the right of the plot.
//!
//! plotters is built with `ab_glyph` rather than `ttf` so that building needs no fontconfig or
//! freetype. The price is that a TrueType font must be registered at run time, for SVG as well as
//! PNG: plotters measures every label through the registered font to lay the chart out (without
//! one, SVG text would silently go missing). `CRYPTOTEST_FONT` names a font file; otherwise
//! well-known system paths are tried (Debian: `fonts-dejavu-core`).

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};

/// One line of the plot: a label and (operand size in bytes, throughput in Mb/s) points.
pub struct Series {
    pub label: String,
    pub points: Vec<(usize, f64)>,
}

/// Fonts tried in order; `CRYPTOTEST_FONT` (a .ttf path) goes before them.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
];

/// Distinct on white (matplotlib's tab10).
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

const FONT: &str = "sans-serif";
const PLOT_WIDTH: u32 = 1000;
const MIN_HEIGHT: u32 = 700;
const LEGEND_FONT: u32 = 15;
const LEGEND_ROW: u32 = 22;
/// Legend rows the canvas grows for; a longer legend is cut at the bottom edge.
const MAX_LEGEND_ROWS: usize = 200;

/// Checks, before anything is measured, that a plot can be written to `path`: a known
/// extension, a font for the text, and a file that can be opened for writing (a file this
/// check creates is removed again; an existing one is left as it is until the plot
/// replaces it).
pub fn check_path(path: &Path) -> Result<(), String> {
    is_png(path)?;
    ensure_font()?;
    check_writable(path)
}

fn check_writable(path: &Path) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("cannot write plot to {}: {e}", path.display());
    match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(_) => std::fs::remove_file(path).map_err(cannot),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::OpenOptions::new().write(true).open(path).map(drop).map_err(cannot)
        }
        Err(e) => Err(cannot(e)),
    }
}

/// Whether `path` asks for a PNG (else an SVG); an error for any other extension.
fn is_png(path: &Path) -> Result<bool, String> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(false),
        Some("png") => Ok(true),
        _ => Err(format!(
            "cannot plot to {}: unsupported file extension (accepted: .svg, .png)",
            path.display()
        )),
    }
}

/// Writes the plot to `path`; the format follows the extension (.svg or .png).
pub fn write_plot(path: &Path, title: &str, series: &[Series]) -> Result<(), String> {
    let png = is_png(path)?;
    let data = Data::new(series)?;
    ensure_font()?;

    // The canvas grows to the right for the legend and downwards when it has many rows.
    let width = PLOT_WIDTH + legend_width(&data);
    let height = MIN_HEIGHT.max(120 + LEGEND_ROW * data.lines.len().min(MAX_LEGEND_ROWS) as u32);
    let drawn = |e: String| format!("cannot draw the plot: {e}");
    let bytes = if png {
        // Drawn into memory and encoded here, so that plotters needs no image encoder and a
        // write error is reported like the SVG one.
        let mut rgb = vec![0u8; width as usize * height as usize * 3];
        draw(BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area(), title, &data)
            .map_err(drawn)?;
        encode_png(&rgb, width, height).map_err(|e| format!("cannot encode the PNG: {e}"))?
    } else {
        let mut svg = String::new();
        draw(SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area(), title, &data)
            .map_err(drawn)?;
        svg.into_bytes()
    };
    std::fs::write(path, bytes).map_err(|e| format!("cannot write plot to {}: {e}", path.display()))
}

/// The drawable part of the input: positive points only, sorted by size, and the axis ranges.
struct Data {
    lines: Vec<(String, Vec<(f64, f64)>)>,
    x: (f64, f64),
    y: (f64, f64),
}

impl Data {
    fn new(series: &[Series]) -> Result<Data, String> {
        if series.is_empty() {
            return Err("nothing to plot: no series given".to_string());
        }
        let lines: Vec<(String, Vec<(f64, f64)>)> = series
            .iter()
            .map(|s| {
                // Log axes cannot show zero (a failed case) or a size of 0; such points are left out.
                let mut pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .filter(|&&(size, rate)| size > 0 && rate.is_finite() && rate > 0.0)
                    .map(|&(size, rate)| (size as f64, rate))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                // Kept in the legend so that a case that failed everywhere is still seen.
                let label = if pts.is_empty() { format!("{} (no data)", s.label) } else { s.label.clone() };
                (label, pts)
            })
            .collect();
        let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::INFINITY, 0f64, f64::INFINITY, 0f64);
        for &(x, y) in lines.iter().flat_map(|(_, p)| p) {
            (x_min, x_max, y_min, y_max) = (x_min.min(x), x_max.max(x), y_min.min(y), y_max.max(y));
        }
        if x_max == 0.0 {
            return Err("nothing to plot: no series has a point with positive throughput".to_string());
        }
        // Padding keeps end markers off the axes and gives a single value a visible range; the
        // clamps keep the logarithms finite for extreme rates.
        let x = (x_min / 2f64.powf(0.3), x_max * 2f64.powf(0.3));
        let y = ((y_min / 10f64.powf(0.2)).max(f64::MIN_POSITIVE), (y_max * 10f64.powf(0.2)).min(f64::MAX));
        Ok(Data { lines, x, y })
    }

    fn x_ticks(&self) -> Vec<f64> {
        let ticks = powers_in(2.0, &[1.0], self.x);
        if ticks.len() >= 2 {
            return thin(ticks, 12);
        }
        // A narrow range may hold no power of two: label the measured sizes instead.
        let mut sizes: Vec<f64> = self.lines.iter().flat_map(|(_, p)| p.iter().map(|p| p.0)).collect();
        sizes.sort_by(f64::total_cmp);
        sizes.dedup();
        thin(sizes, 12)
    }

    fn y_ticks(&self) -> Vec<f64> {
        // Decades when the data spans several, finer 1-2-5 or 1..9 steps when it is narrow.
        let steps: [&[f64]; 3] = [&[1.0], &[1.0, 2.0, 5.0], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]];
        let mut ticks = Vec::new();
        for mantissas in steps {
            ticks = powers_in(10.0, mantissas, self.y);
            if ticks.len() >= 3 {
                break;
            }
        }
        thin(ticks, 12)
    }
}

/// `m * base^k` for each mantissa `m`, within `range`, ascending.
fn powers_in(base: f64, mantissas: &[f64], range: (f64, f64)) -> Vec<f64> {
    let (lo, hi) = (range.0.log(base).floor() as i32, range.1.log(base).ceil() as i32);
    (lo..=hi)
        .flat_map(|k| mantissas.iter().map(move |m| m * base.powi(k)))
        .filter(|v| *v >= range.0 && *v <= range.1)
        .collect()
}

/// Keeps every n-th value so that at most `max` remain.
fn thin(values: Vec<f64>, max: usize) -> Vec<f64> {
    let step = values.len().div_ceil(max).max(1);
    values.into_iter().step_by(step).collect()
}

/// Sizes as people write them: 512, 1K, 8K, 1M; others (1500) in full.
fn format_bytes(v: f64) -> String {
    let n = v.round() as u64;
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// Tick labels: plain numbers with enough decimals (0.01, 0.5, 200000), exponents (1e9) only far
/// out of range. Ticks are one significant digit, so `.0e` loses nothing.
fn format_rate(v: f64) -> String {
    if !(1e-4..1e8).contains(&v) {
        return format!("{v:.0e}");
    }
    let decimals = (-v.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

/// Line and marker styles of series `i`: palette colour, filled markers on the first pass
/// through the palette, hollow markers and thinner lines on the next.
fn styles(i: usize) -> (ShapeStyle, ShapeStyle) {
    let color = PALETTE[i % PALETTE.len()];
    if (i / PALETTE.len()) % 2 == 0 {
        (color.stroke_width(2), color.filled())
    } else {
        (color.stroke_width(1), color.stroke_width(2))
    }
}

/// Room for the legend: its widest label, the sample line and the margins around them.
fn legend_width(data: &Data) -> u32 {
    let font = (FONT, LEGEND_FONT).into_font();
    let widest = data.lines.iter().filter_map(|(l, _)| font.box_size(l).ok()).map(|(w, _)| w).max();
    widest.unwrap_or(0).min(1000) + 70
}

/// Draws on either backend: the plot on the left, its legend on the right.
fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, title: &str, data: &Data) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    // The legend gets its own area right of the plot, so that it never hides a line; plotters'
    // own legend is confined to the plotting area.
    let (plot_area, legend_area) = root.split_horizontally(PLOT_WIDTH);
    let x_range = (data.x.0..data.x.1).log_scale().with_key_points(data.x_ticks());
    let y_range = (data.y.0..data.y.1).log_scale().with_key_points(data.y_ticks());

    let mut builder = ChartBuilder::on(&plot_area);
    builder.margin(15).x_label_area_size(55).y_label_area_size(80);
    if !title.is_empty() {
        builder.caption(title, (FONT, 24));
    }
    let mut chart = builder.build_cartesian_2d(x_range, y_range).map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("operand size (bytes)")
        .y_desc("Mb/s")
        .x_label_formatter(&|v| format_bytes(*v))
        .y_label_formatter(&|v| format_rate(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(err)?;

    for (i, (_, pts)) in data.lines.iter().enumerate() {
        let (line, marker) = styles(i);
        chart.draw_series(LineSeries::new(pts.iter().copied(), line)).map_err(err)?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, marker))).map_err(err)?;
    }

    // Legend rows start level with the top of the plotting area.
    let top = chart.plotting_area().get_pixel_range().1.start - root.get_pixel_range().1.start + 10;
    let label_style =
        TextStyle::from((FONT, LEGEND_FONT).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (label, pts)) in data.lines.iter().enumerate().take(MAX_LEGEND_ROWS) {
        let (line, marker) = styles(i);
        let y = top + i as i32 * LEGEND_ROW as i32;
        // A series without points gets no sample line: nothing in the plot looks like it.
        if !pts.is_empty() {
            legend_area.draw(&PathElement::new([(5, y), (33, y)], line)).map_err(err)?;
            legend_area.draw(&Circle::new((19, y), 4, marker)).map_err(err)?;
        }
        legend_area.draw(&Text::new(label.as_str(), (42, y), &label_style)).map_err(err)?;
    }
    root.present().map_err(err)
}

/// Registers the first usable font as plotters' "sans-serif", once per process; the path in
/// `CRYPTOTEST_FONT`, when set, is tried first.
fn ensure_font() -> Result<(), String> {
    static FONT_RESULT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT_RESULT
        .get_or_init(|| {
            let from_env = std::env::var("CRYPTOTEST_FONT").ok();
            let paths: Vec<&str> =
                from_env.as_deref().into_iter().chain(FONT_PATHS.iter().copied()).collect();
            for path in &paths {
                let Ok(bytes) = std::fs::read(path) else { continue };
                // plotters wants 'static font bytes; this runs once per process, so the leak is
                // bounded.
                if register_font(FONT, FontStyle::Normal, Box::leak(bytes.into_boxed_slice())).is_ok() {
                    return Ok(());
                }
            }
            Err(format!(
                "no usable TrueType font for the plot's text, needed for SVG and PNG alike (tried: {}); \
                 `apt-get install fonts-dejavu-core` provides one, or set CRYPTOTEST_FONT to a .ttf file",
                paths.join(", ")
            ))
        })
        .clone()
}

fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A file under the temp dir, unique per process and test, removed on drop.
    struct TempFile(PathBuf);
    impl TempFile {
        fn new(name: &str) -> TempFile {
            TempFile(std::env::temp_dir().join(format!("cryptotest-plot-{}-{name}", std::process::id())))
        }
    }
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// The up-front check leaves no file where there was none, and leaves an existing one
    /// untouched.
    #[test]
    fn the_writability_check_leaves_nothing_behind() {
        let new = TempFile::new("check.svg");
        check_writable(&new.0).unwrap();
        assert!(!new.0.exists());
        std::fs::write(&new.0, b"kept").unwrap();
        check_writable(&new.0).unwrap();
        assert_eq!(std::fs::read(&new.0).unwrap(), b"kept");
        let e = check_writable(&new.0.join("under-a-file.svg")).unwrap_err();
        assert!(e.starts_with("cannot write plot to ") && e.contains("Not a directory"), "{e}");
    }

    fn series(label: &str, points: &[(usize, f64)]) -> Series {
        Series { label: label.to_string(), points: points.to_vec() }
    }

    fn sample() -> Vec<Series> {
        vec![
            series("aes-128-gcm · soft", &[(16, 850.0), (64, 2900.0), (1024, 21000.0), (8192, 48000.0)]),
            series("chacha20-poly1305 · null", &[(16, 0.02), (64, 0.5), (1024, 90.0), (8192, 180000.0)]),
        ]
    }

    fn write_svg(name: &str, series: &[Series]) -> String {
        let file = TempFile::new(name);
        write_plot(&file.0, "cryptotest", series).expect("plot written");
        std::fs::read_to_string(&file.0).expect("svg readable")
    }

    #[test]
    fn svg_has_labels_and_lines() {
        let svg = write_svg("lines.svg", &sample());
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for label in ["aes-128-gcm · soft", "chacha20-poly1305 · null", "Mb/s", "cryptotest", "8K"] {
            assert!(svg.contains(label), "missing {label}");
        }
        assert!(svg.contains("<polyline") || svg.contains("<path"));
        assert_eq!(svg.matches("<circle").count(), 8 + 2, "one marker per point plus one per legend row");
    }

    #[test]
    fn png_has_signature_size_and_series_colour() {
        let file = TempFile::new("lines.png");
        write_plot(&file.0, "cryptotest", &sample()).expect("plot written");
        let bytes = std::fs::read(&file.0).expect("png readable");
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&bytes[12..16], b"IHDR");
        let be = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let (width, height) = (be(16), be(20));
        assert!((PLOT_WIDTH + 100..PLOT_WIDTH + 600).contains(&width), "width {width}");
        assert_eq!(height, MIN_HEIGHT);

        // The first series' colour must appear: the line really was drawn, not just the frame.
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().expect("png decodes");
        let mut rgb = vec![0; reader.output_buffer_size().expect("buffer size")];
        reader.next_frame(&mut rgb).expect("png frame");
        let RGBColor(r, g, b) = PALETTE[0];
        let hits = rgb.chunks_exact(3).filter(|p| *p == [r, g, b]).count();
        assert!(hits > 200, "only {hits} pixels of the first series' colour");
    }

    #[test]
    fn extension_is_case_insensitive_and_checked() {
        let file = TempFile::new("upper.SVG");
        write_plot(&file.0, "t", &sample()).expect("upper-case .SVG accepted");
        for bad in ["plot.jpg", "plot", "plot.svg.txt"] {
            let err = write_plot(Path::new(bad), "t", &sample()).expect_err(bad);
            assert!(err.contains(".svg") && err.contains(".png") && err.contains(bad), "{err}");
        }
    }

    #[test]
    fn nothing_to_plot_is_an_error() {
        let file = TempFile::new("empty.svg");
        let err = write_plot(&file.0, "t", &[]).expect_err("no series");
        assert!(err.contains("no series"), "{err}");
        let zeros = [series("a · soft", &[(16, 0.0), (64, -1.0)]), series("b · soft", &[(0, 5.0)])];
        let err = write_plot(&file.0, "t", &zeros).expect_err("no positive point");
        assert!(err.contains("positive"), "{err}");
        assert!(!file.0.exists(), "no file is left behind on error");
    }

    #[test]
    fn single_point_series_is_a_marker() {
        let svg = write_svg("single.svg", &[series("aes-128-cbc · sim", &[(1500, 730.5)])]);
        assert!(svg.contains("aes-128-cbc · sim"));
        assert!(svg.contains("1500"), "the lone size is a tick");
        assert_eq!(svg.matches("<circle").count(), 2, "data marker and legend marker");
    }

    #[test]
    fn bad_points_are_skipped_not_fatal() {
        let mixed = [
            series("aes-256-gcm · soft", &[(8, 0.0), (16, 10.0), (32, -1.0), (64, f64::NAN), (128, 40.0)]),
            series("sha256 · soft", &[(16, 0.0)]),
        ];
        let svg = write_svg("zeros.svg", &mixed);
        assert_eq!(svg.matches("<circle").count(), 2 + 1, "two good points, one legend marker");
        assert!(svg.contains("sha256 · soft (no data)"));
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let odd = [
            series("tiny · soft", &[(1, 1e-300), (usize::MAX, 5e-324)]),
            series("huge · soft", &[(2, 1e308), (3, f64::MAX), (4, f64::INFINITY)]),
        ];
        write_svg("extreme.svg", &odd);
        let many: Vec<Series> = (0..500).map(|i| series(&format!("s{i}"), &[(64, 1.0 + i as f64)])).collect();
        let file = TempFile::new("many.png");
        write_plot(&file.0, "many", &many).expect("many series plotted");
    }

    #[test]
    fn unwritable_path_names_path_and_cause() {
        let path = std::env::temp_dir().join("cryptotest-no-such-dir-7f3a/plot.svg");
        let err = write_plot(&path, "t", &sample()).expect_err("missing directory");
        assert!(err.contains(&path.display().to_string()) && err.contains("os error"), "{err}");
    }

    #[test]
    fn ticks_and_labels() {
        let data = Data::new(&[series("a", &[(8, 1.0), (16, 3.0), (8192, 150000.0)])]).expect("data");
        let x = data.x_ticks();
        assert_eq!(x.first(), Some(&8.0));
        assert_eq!(x.last(), Some(&8192.0));
        assert!(x.iter().all(|v| v.log2().fract() == 0.0));
        assert_eq!(data.y_ticks(), [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]);
        assert_eq!(
            ["8", "1K", "8K", "1500", "2M", "4G"].map(String::from),
            [8.0, 1024.0, 8192.0, 1500.0, 2097152.0, 4294967296.0].map(format_bytes)
        );
        assert_eq!(
            ["0.01", "0.5", "20", "200000", "1e10", "2e-5"].map(String::from),
            [0.01, 0.5, 20.0, 200000.0, 1e10, 2e-5].map(format_rate)
        );
    }
}
