//! The throttling families: `ferry_throttle_limit` (every limit, 0 =
//! unlimited; `table=""` for the job-wide ones) and
//! `ferry_throttled_seconds_total` (time the pipelines slept on a limit,
//! summed, per direction).

use super::{with, Families, Labels};
use crate::server::view::JobView;
use ferry_engine::throttle::{Limits, ThrottleSnapshot};
use prometheus_client::metrics::MetricType;

pub(super) fn push_throttle(out: &mut Families, v: &JobView, labels: &Labels) {
    push_throttle_snapshot(out, &v.throttle, labels);
}

pub(super) fn push_throttle_snapshot(out: &mut Families, t: &ThrottleSnapshot, labels: &Labels) {
    push_limits(out, &t.job, "", labels);
    for (table, limits) in &t.tables {
        push_limits(out, limits, table, labels);
    }
    for (direction, seconds) in [
        ("read", t.throttled_read_seconds),
        ("write", t.throttled_write_seconds),
    ] {
        out.ferry(
            "throttled_seconds",
            "Seconds the job's pipelines slept on a throttle limit, summed over pipelines",
            MetricType::Counter,
            with(labels.clone(), &[("direction", direction)]),
            seconds,
        );
    }
}

fn push_limits(out: &mut Families, limits: &Limits, table: &str, labels: &Labels) {
    for (direction, rates) in [("read", &limits.read), ("write", &limits.write)] {
        for (window, rate) in [("snapshot", &rates.snapshot), ("diff", &rates.diff)] {
            for (unit, value) in [
                ("rows", rate.rows_per_second),
                ("bytes", rate.bytes_per_second),
            ] {
                out.ferry(
                    "throttle_limit",
                    "A throttle limit per second (0: unlimited); table=\"\" is the job-wide one",
                    MetricType::Gauge,
                    with(
                        labels.clone(),
                        &[
                            ("direction", direction),
                            ("window", window),
                            ("unit", unit),
                            ("table", table),
                        ],
                    ),
                    value as f64,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{encode_families, render, Families};
    use super::*;
    use ferry_engine::throttle::Rate;
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::DescriptorEncoder;

    #[derive(Debug)]
    struct Shown(ThrottleSnapshot);

    impl Collector for Shown {
        fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let mut out = Families::default();
            let labels = vec![("job_id".to_string(), "j1".to_string())];
            push_throttle_snapshot(&mut out, &self.0, &labels);
            encode_families(out.0, encoder)
        }
    }

    #[test]
    fn limits_per_direction_window_unit_and_table_and_time_throttled() {
        let mut t = ThrottleSnapshot::default();
        t.job.read.snapshot = Rate::new(2000, 0);
        let mut own = Limits::default();
        own.write.diff = Rate::new(0, 4096);
        t.tables.insert("orders".into(), own);
        t.throttled_read_seconds = 1.5;
        let mut r = prometheus_client::registry::Registry::default();
        r.register_collector(Box::new(Shown(t)));
        let text = render(&r);
        for line in [
            r#"ferry_throttle_limit{job_id="j1",direction="read",window="snapshot",unit="rows",table=""} 2000.0"#,
            r#"ferry_throttle_limit{job_id="j1",direction="read",window="diff",unit="bytes",table=""} 0.0"#,
            r#"ferry_throttle_limit{job_id="j1",direction="write",window="diff",unit="bytes",table="orders"} 4096.0"#,
            r#"ferry_throttled_seconds_total{job_id="j1",direction="read"} 1.5"#,
            r#"ferry_throttled_seconds_total{job_id="j1",direction="write"} 0.0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        assert_eq!(text.matches("ferry_throttle_limit{").count(), 16);
    }
}
