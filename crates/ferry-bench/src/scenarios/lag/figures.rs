//! The pure figures of the lag sweep: the list of rates, the split of the
//! source's CPU against the writer-only baseline, and the saturation
//! verdict.

use serde::Serialize;

/// Saturated when the writer achieved less than this share of its target...
pub const WRITER_SHORT_FRACTION: f64 = 0.95;
/// ... or the source tablet servers used at least this share of the cores.
pub const SOURCE_BOUND_FRACTION: f64 = 0.90;

/// The single rate run when neither `--rate` nor `--rates` is given.
pub const DEFAULT_RATE: f64 = 5_000.0;

/// `--rates A,B,C`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates(pub Vec<f64>);

/// Parses `--rates`: a comma-separated list of positive ops/s (`_` allowed
/// as a digit separator), each at most once, kept in the order given.
pub fn parse_rates(s: &str) -> Result<Rates, String> {
    let mut out: Vec<f64> = Vec::new();
    for part in s.split(',') {
        let p = part.trim();
        if p.is_empty() {
            return Err(format!("'{s}': an empty entry in the list of rates"));
        }
        let r = parse_rate(p)?;
        if out.contains(&r) {
            return Err(format!("'{s}': rate {p} is listed twice"));
        }
        out.push(r);
    }
    Ok(Rates(out))
}

/// Parses one rate (`--rate`, or an entry of `--rates`).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let clean: String = s.trim().chars().filter(|c| *c != '_').collect();
    match clean.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "'{s}' is not a positive number of operations per second"
        )),
    }
}

/// The rates to run: `--rates` if given, else `--rate`, else the default
/// single rate.
pub fn rate_list(rate: Option<f64>, rates: Option<Rates>) -> Vec<f64> {
    match (rates, rate) {
        (Some(Rates(list)), _) if !list.is_empty() => list,
        (_, Some(r)) => vec![r],
        _ => vec![DEFAULT_RATE],
    }
}

/// A rate as part of a table or file name: `5000`, `2_5` for 2.5.
pub fn rate_tag(rate: f64) -> String {
    if rate.fract() == 0.0 {
        format!("{rate:.0}")
    } else {
        rate.to_string().replace('.', "_")
    }
}

/// The writer-only phase's figures [`split_source_cpu`] needs.
#[derive(Debug, Clone, Copy)]
pub struct BaselineCpu {
    /// Source tablet servers' CPU (cores) with the writer alone.
    pub source_cores: f64,
    /// Of which LLVM compiles (cores).
    pub codegen_cores: f64,
    /// What the writer achieved alone (ops/s).
    pub achieved_ops_per_s: f64,
}

/// The source tablet servers' CPU while the writer ran with ferry, split
/// by cause (cores).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuSplit {
    pub total_cores: f64,
    /// (a) LLVM compiles: with ferry, less the baseline's (scaled).
    pub llvm_compiles_cores: f64,
    /// (b) ferry's diff scans apart from the compiles: total − (c) − (a).
    pub diff_scans_cores: Option<f64>,
    /// (c) the rest: the writer's own load and the background, i.e. the
    /// writer-only baseline scaled to the ops/s achieved with ferry.
    pub rest_cores: Option<f64>,
    /// ((a) + (b)) / total = (with ferry − writer only) / with ferry.
    pub ferry_share: Option<f64>,
    /// Ops/s achieved with ferry over ops/s achieved alone.
    pub baseline_scale: Option<f64>,
}

/// Splits `total` source cores (of which `codegen` in LLVM compiles,
/// with the writer achieving `achieved` ops/s) against the writer-only
/// `baseline`; without a baseline only the compiles are known.
pub fn split_source_cpu(
    total: f64,
    codegen: f64,
    achieved: f64,
    baseline: Option<BaselineCpu>,
) -> CpuSplit {
    let Some(b) = baseline else {
        return CpuSplit {
            total_cores: total,
            llvm_compiles_cores: codegen,
            diff_scans_cores: None,
            rest_cores: None,
            ferry_share: None,
            baseline_scale: None,
        };
    };
    let scale = if b.achieved_ops_per_s > 0.0 && achieved.is_finite() && achieved > 0.0 {
        achieved / b.achieved_ops_per_s
    } else {
        1.0
    };
    let rest = b.source_cores * scale;
    let llvm = codegen - b.codegen_cores * scale;
    let ferry = total - rest;
    CpuSplit {
        total_cores: total,
        llvm_compiles_cores: llvm,
        diff_scans_cores: Some(ferry - llvm),
        rest_cores: Some(rest),
        ferry_share: (total > 0.0).then(|| ferry / total),
        baseline_scale: Some(scale),
    }
}

/// Whether the source kept up at a rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Saturation {
    /// `writer_short || source_cpu_bound`.
    pub saturated: bool,
    pub writer_fraction_of_target: f64,
    /// The writer achieved less than [`WRITER_SHORT_FRACTION`] of its target.
    pub writer_short: bool,
    pub source_cores: f64,
    pub machine_cores: usize,
    pub source_fraction_of_machine: f64,
    /// The source tablet servers used at least [`SOURCE_BOUND_FRACTION`]
    /// of the machine's cores.
    pub source_cpu_bound: bool,
    /// The writer alone (no ferry) already fell short of its target.
    pub writer_only_short: Option<bool>,
}

/// Saturation at `target` ops/s: what the writer achieved with ferry (and
/// alone, if measured) and the source tablet servers' cores with ferry.
pub fn saturation(
    target: f64,
    achieved: f64,
    source_cores: f64,
    machine_cores: usize,
    writer_only_achieved: Option<f64>,
) -> Saturation {
    let fraction = if target > 0.0 {
        achieved / target
    } else {
        f64::NAN
    };
    let cores = machine_cores.max(1);
    let of_machine = source_cores / cores as f64;
    // NaN (no figure) counts as not short / not bound.
    let writer_short = fraction < WRITER_SHORT_FRACTION;
    let source_cpu_bound = of_machine >= SOURCE_BOUND_FRACTION;
    Saturation {
        saturated: writer_short || source_cpu_bound,
        writer_fraction_of_target: fraction,
        writer_short,
        source_cores,
        machine_cores: cores,
        source_fraction_of_machine: of_machine,
        source_cpu_bound,
        writer_only_short: writer_only_achieved
            .map(|a| target > 0.0 && a / target < WRITER_SHORT_FRACTION),
    }
}

impl Saturation {
    /// `no`, or `yes:` and why.
    pub fn describe(&self) -> String {
        let mut why = Vec::new();
        if self.writer_short {
            why.push(format!(
                "writer {:.1} % of target",
                self.writer_fraction_of_target * 100.0
            ));
        }
        if self.source_cpu_bound {
            why.push(format!(
                "source {:.2} of {} cores",
                self.source_cores, self.machine_cores
            ));
        }
        if self.writer_only_short == Some(true) {
            why.push("short even without ferry".into());
        }
        if self.saturated {
            format!("yes: {}", why.join(", "))
        } else if why.is_empty() {
            "no".into()
        } else {
            format!("no ({})", why.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rate_lists() {
        assert_eq!(
            parse_rates("1000,5000,20000"),
            Ok(Rates(vec![1000.0, 5000.0, 20000.0]))
        );
        assert_eq!(
            parse_rates(" 20_000 , 500.5 "),
            Ok(Rates(vec![20000.0, 500.5]))
        );
        assert_eq!(parse_rates("7"), Ok(Rates(vec![7.0])));
        for bad in [
            "",
            "1000,",
            ",1000",
            "1000,,5000",
            "0",
            "-5",
            "abc",
            "1000,1000",
            "inf",
            "NaN",
        ] {
            assert!(parse_rates(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_rate("5000").is_ok());
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn rates_fall_back_to_rate_then_default() {
        assert_eq!(rate_list(None, None), vec![DEFAULT_RATE]);
        assert_eq!(rate_list(Some(300.0), None), vec![300.0]);
        assert_eq!(rate_list(None, Some(Rates(vec![1.0, 2.0]))), vec![1.0, 2.0]);
        assert_eq!(rate_tag(5000.0), "5000");
        assert_eq!(rate_tag(2.5), "2_5");
    }

    #[test]
    fn splits_source_cpu_against_the_baseline() {
        // 1.6 cores with ferry (0.5 of them compiles); the writer alone
        // took 0.8 cores at the same achieved rate, with no compiles.
        let b = BaselineCpu {
            source_cores: 0.8,
            codegen_cores: 0.0,
            achieved_ops_per_s: 5000.0,
        };
        let s = split_source_cpu(1.6, 0.5, 5000.0, Some(b));
        assert_eq!(s.rest_cores, Some(0.8));
        assert!((s.llvm_compiles_cores - 0.5).abs() < 1e-12);
        assert!((s.diff_scans_cores.unwrap_or(f64::NAN) - 0.3).abs() < 1e-12);
        assert!((s.ferry_share.unwrap_or(f64::NAN) - 0.5).abs() < 1e-12);
        assert_eq!(s.baseline_scale, Some(1.0));

        // The writer only reached half its baseline rate with ferry: half
        // of the baseline's cost is the writer's; the baseline's own
        // compiles are taken off (a).
        let b = BaselineCpu {
            source_cores: 1.0,
            codegen_cores: 0.1,
            achieved_ops_per_s: 4000.0,
        };
        let s = split_source_cpu(2.0, 0.65, 2000.0, Some(b));
        assert_eq!(s.baseline_scale, Some(0.5));
        assert_eq!(s.rest_cores, Some(0.5));
        assert!((s.llvm_compiles_cores - 0.6).abs() < 1e-12);
        assert!((s.diff_scans_cores.unwrap_or(f64::NAN) - 0.9).abs() < 1e-12);
        assert!((s.ferry_share.unwrap_or(f64::NAN) - 0.75).abs() < 1e-12);
        let parts =
            s.llvm_compiles_cores + s.diff_scans_cores.unwrap_or(0.0) + s.rest_cores.unwrap_or(0.0);
        assert!((parts - s.total_cores).abs() < 1e-12);

        // No baseline: only the compiles are known.
        let s = split_source_cpu(1.0, 0.2, 100.0, None);
        assert_eq!(s.llvm_compiles_cores, 0.2);
        assert_eq!(
            (s.diff_scans_cores, s.rest_cores, s.ferry_share),
            (None, None, None)
        );

        // A writer that achieved nothing: unscaled; no CPU: no share.
        let s = split_source_cpu(0.0, 0.0, 0.0, Some(b));
        assert_eq!(s.baseline_scale, Some(1.0));
        assert_eq!(s.ferry_share, None);
    }

    #[test]
    fn saturation_by_writer_or_source_cpu() {
        let s = saturation(5000.0, 4990.0, 1.0, 2, Some(5000.0));
        assert!(!s.saturated && !s.writer_short && !s.source_cpu_bound);
        assert_eq!(s.writer_only_short, Some(false));
        assert_eq!(s.describe(), "no");

        let s = saturation(5000.0, 4726.0, 1.75, 2, Some(4990.0));
        assert!(s.saturated && s.writer_short && !s.source_cpu_bound);
        assert_eq!(s.describe(), "yes: writer 94.5 % of target");

        let s = saturation(20000.0, 19_500.0, 1.85, 2, Some(15_000.0));
        assert!(s.saturated && !s.writer_short && s.source_cpu_bound);
        assert_eq!(s.writer_only_short, Some(true));
        assert_eq!(
            s.describe(),
            "yes: source 1.85 of 2 cores, short even without ferry"
        );

        // Exactly at the thresholds: 95 % of target is enough, 90 % of the
        // cores is bound.
        let s = saturation(1000.0, 950.0, 1.8, 2, None);
        assert!(!s.writer_short && s.source_cpu_bound);
        assert_eq!(s.writer_only_short, None);

        // No core count: counts as one core.
        assert!(saturation(1000.0, 1000.0, 0.95, 0, None).source_cpu_bound);
    }
}
