//! A run's loss curves as an SVG drawing: the train loss, the validation loss and,
//! when the run has one, the fixed validation set's loss, by epoch, written beside the
//! log after every epoch so that a run can be looked at while it trains and a
//! lineage's runs side by side afterwards. Plain SVG with no script or external
//! reference: a browser, an image viewer or a repository's file view shows it.

use std::fmt::Write;

/// The drawing's size and the margins around its plot, in pixels.
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// Horizontal grid lines, each labelled with its loss.
const Y_TICKS: usize = 5;

/// The curves drawn: the log's key, the legend's name and the colour.
const SERIES: [(&str, &str, &str); 3] = [
    ("train_loss", "train", "#1f77b4"),
    ("validation_loss", "validation", "#d62728"),
    ("fixed_validation_loss", "fixed validation", "#2ca02c"),
];

/// The points `(epoch, loss)` of `key` in `log`, in the log's order.
pub fn series(log: &[serde_json::Value], key: &str) -> Vec<(f64, f64)> {
    log.iter()
        .filter_map(|entry| Some((entry.get("epoch")?.as_f64()?, entry.get(key)?.as_f64()?)))
        .filter(|(_, loss)| loss.is_finite())
        .collect()
}

/// The SVG drawing of `log`'s losses (one entry per epoch, as the run's `log.jsonl`).
pub fn losses_svg(log: &[serde_json::Value]) -> String {
    let drawn: Vec<_> = SERIES
        .iter()
        .map(|&(key, name, colour)| (name, colour, series(log, key)))
        .filter(|s| !s.2.is_empty())
        .collect();
    let points = drawn.iter().flat_map(|(_, _, points)| points.iter());
    let (mut low, mut high, mut last_epoch) = (f64::INFINITY, f64::NEG_INFINITY, 1.0f64);
    for &(epoch, loss) in points {
        (low, high, last_epoch) = (low.min(loss), high.max(loss), last_epoch.max(epoch));
    }
    if !low.is_finite() {
        (low, high) = (0.0, 1.0);
    }
    // A flat curve still gets a band to sit in; 5% room above and below.
    let pad = ((high - low) * 0.05).max(high.abs() * 1e-3).max(1e-9);
    let (low, high) = (low - pad, high + pad);
    let x = |epoch: f64| LEFT + epoch / last_epoch * (WIDTH - LEFT - RIGHT);
    let y = |loss: f64| TOP + (high - loss) / (high - low) * (HEIGHT - TOP - BOTTOM);

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    for tick in 0..=Y_TICKS {
        let loss = low + (high - low) * tick as f64 / Y_TICKS as f64;
        let at = y(loss);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{at:.1}" x2="{:.1}" y2="{at:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{loss:.5}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            at + 4.0
        );
    }
    let step = (last_epoch / 10.0).ceil().max(1.0);
    let mut epoch = 0.0;
    while epoch <= last_epoch {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{epoch}</text>"#,
            x(epoch),
            HEIGHT - BOTTOM + 18.0
        );
        epoch += step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">epoch</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        HEIGHT - 8.0
    );
    for (index, (name, colour, points)) in drawn.iter().enumerate() {
        let path: Vec<String> = points.iter().map(|&(epoch, loss)| format!("{:.1},{:.1}", x(epoch), y(loss))).collect();
        let _ = writeln!(
            svg,
            r#"<polyline data-series="{name}" fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        let legend = LEFT + 10.0 + index as f64 * 150.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{legend:.1}" y1="20" x2="{:.1}" y2="20" stroke="{colour}" stroke-width="2"/><text x="{:.1}" y="24">{name}</text>"#,
            legend + 20.0,
            legend + 25.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> Vec<serde_json::Value> {
        vec![
            serde_json::json!({"epoch": 0, "validation_loss": 0.0080, "fixed_validation_loss": 0.0090}),
            serde_json::json!({"epoch": 1, "train_loss": 0.0070, "validation_loss": 0.0060, "fixed_validation_loss": 0.0065}),
            serde_json::json!({"epoch": 2, "train_loss": 0.0050, "validation_loss": 0.0055, "fixed_validation_loss": 0.0061}),
        ]
    }

    /// The points of the polyline named `name`, as drawn.
    fn drawn(svg: &str, name: &str) -> Vec<(f64, f64)> {
        let start = svg.find(&format!(r#"data-series="{name}""#)).expect("the series is drawn");
        let points = &svg[start..];
        let points = &points[points.find("points=\"").unwrap() + 8..];
        let points = &points[..points.find('"').unwrap()];
        points
            .split(' ')
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn each_loss_is_a_curve_that_falls_where_the_loss_falls() {
        let svg = losses_svg(&log());
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let train = drawn(&svg, "train");
        let validation = drawn(&svg, "validation");
        let fixed = drawn(&svg, "fixed validation");
        assert_eq!((train.len(), validation.len(), fixed.len()), (2, 3, 3), "epoch 0 has no train loss");
        // Lower losses are drawn lower on the page: larger y.
        assert!(validation.windows(2).all(|w| w[1].1 > w[0].1), "{validation:?}");
        // Epochs run left to right, the last one at the plot's right edge.
        assert!(validation.windows(2).all(|w| w[1].0 > w[0].0));
        assert!((validation[2].0 - (WIDTH - RIGHT)).abs() < 0.1, "{validation:?}");
        // The highest and lowest losses sit within the plot, near its edges.
        let ys: Vec<f64> = [&train, &validation, &fixed].iter().flat_map(|s| s.iter().map(|p| p.1)).collect();
        let (top, bottom) = ys.iter().fold((f64::MAX, f64::MIN), |(a, b), &y| (a.min(y), b.max(y)));
        assert!(top > TOP && top < TOP + 20.0, "{top}");
        assert!(bottom < HEIGHT - BOTTOM && bottom > HEIGHT - BOTTOM - 20.0, "{bottom}");
    }

    #[test]
    fn a_log_without_a_fixed_set_or_any_loss_still_draws() {
        let plain: Vec<_> = log()
            .into_iter()
            .map(|mut e| {
                e.as_object_mut().unwrap().remove("fixed_validation_loss");
                e
            })
            .collect();
        assert!(!losses_svg(&plain).contains("fixed validation"));
        let empty = losses_svg(&[]);
        assert!(empty.starts_with("<svg") && !empty.contains("polyline") && !empty.contains("NaN"));
        let flat = losses_svg(&[serde_json::json!({"epoch": 0, "validation_loss": 0.005})]);
        assert!(!flat.contains("NaN") && !flat.contains("inf"), "{flat}");
    }
}
