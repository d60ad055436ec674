//! `xq llr`: the SPRT calculator, with no coordinator.

use anyhow::{Context, bail};
use clap::Args;
use xq_stats::{Model, Sprt, elo_estimate};

#[derive(Args)]
pub struct LlrArgs {
    /// Pentanomial counts N0,N1,N2,N3,N4 (pairs scoring 0, 0.5, 1, 1.5, 2).
    #[arg(long, conflicts_with = "trinomial")]
    penta: Option<String>,
    /// Trinomial counts L,D,W.
    #[arg(long)]
    trinomial: Option<String>,
    #[arg(long, allow_hyphen_values = true)]
    elo0: f64,
    #[arg(long, allow_hyphen_values = true)]
    elo1: f64,
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    #[arg(long, default_value_t = 0.05)]
    beta: f64,
    /// normalized or logistic.
    #[arg(long, default_value = "normalized")]
    model: String,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn counts(text: &str, n: usize, what: &str) -> anyhow::Result<Vec<u64>> {
    let values: Vec<u64> = text
        .split(',')
        .map(|c| c.trim().parse::<u64>().with_context(|| format!("{what}: '{c}' is not a count")))
        .collect::<Result<_, _>>()?;
    if values.len() != n {
        bail!("{what} needs {n} counts, not {}", values.len());
    }
    Ok(values)
}

/// Prints the LLR, its bounds, the decision and the Elo of the counts.
pub fn llr(args: &LlrArgs) -> anyhow::Result<()> {
    let results = match (&args.penta, &args.trinomial) {
        (Some(text), None) => counts(text, 5, "--penta")?,
        (None, Some(text)) => counts(text, 3, "--trinomial")?,
        _ => bail!("give --penta N0,N1,N2,N3,N4 or --trinomial L,D,W"),
    };
    let model = match args.model.as_str() {
        "normalized" => Model::Normalized,
        "logistic" => Model::Logistic,
        other => bail!("--model {other}: use normalized or logistic"),
    };
    let state = Sprt::new(args.elo0, args.elo1, args.alpha, args.beta, model)?.state(&results)?;
    let elo = elo_estimate(&results)?;
    let decision = match state.decision() {
        Some(true) => "H1 accepted",
        Some(false) => "H0 accepted",
        None => "continue",
    };
    if args.json {
        let object = serde_json::json!({
            "llr": state.llr, "lower": state.lower, "upper": state.upper,
            "elo": elo.elo, "elo_low": elo.low, "elo_high": elo.high,
            "los": elo.los, "nelo": elo.nelo, "decision": decision,
        });
        out!("{object}");
    } else {
        out!("LLR {:.4} ({:.4}, {:.4}): {decision}", state.llr, state.lower, state.upper);
        out!(
            "Elo {:+.2} [{:+.2}, {:+.2}], nElo {:+.2}, LOS {:.2}%",
            elo.elo,
            elo.low,
            elo.high,
            elo.nelo,
            elo.los * 100.0
        );
    }
    Ok(())
}
