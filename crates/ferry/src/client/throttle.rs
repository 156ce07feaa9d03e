//! `ferry throttle JOB_ID [--table T] [--read-snapshot-rows N …]`: shows
//! a running job's limits, or changes some and shows the result
//! (`GET` / `PATCH /ferry/jobs/:jobid/throttle`).

use super::Rest;
use crate::api::throttle::{ThrottleRequest, ThrottleSnapshot};
use anyhow::Result;
use ferry_engine::throttle::{Limits, Rate};
use hyper::Method;

/// `ferry throttle`: with `change`, the limits it gives are set first.
pub async fn throttle(rest: &Rest, job: &str, change: Option<&ThrottleRequest>) -> Result<()> {
    let path = format!("/ferry/jobs/{job}/throttle");
    let now: ThrottleSnapshot = match change {
        Some(req) => rest
            .expect_ok(Method::PATCH, &path, Some(req))
            .await?
            .parse()?,
        None => rest.get(&path).await?,
    };
    print!("{}", render(job, &now));
    Ok(())
}

fn limit(n: u64) -> String {
    match n {
        0 => "unlimited".to_string(),
        n => n.to_string(),
    }
}

fn rows_of(out: &mut String, limits: &Limits) {
    let line = |out: &mut String, name: &str, r: &Rate| {
        out.push_str(&format!(
            "  {name:<15} {:>12} {:>14}\n",
            limit(r.rows_per_second),
            limit(r.bytes_per_second)
        ));
    };
    out.push_str(&format!(
        "  {:<15} {:>12} {:>14}\n",
        "", "rows/s", "bytes/s"
    ));
    line(out, "read snapshot", &limits.read.snapshot);
    line(out, "read diff", &limits.read.diff);
    line(out, "write snapshot", &limits.write.snapshot);
    line(out, "write diff", &limits.write.diff);
}

/// The limits as `ferry throttle` prints them.
pub(super) fn render(job: &str, t: &ThrottleSnapshot) -> String {
    let mut out = format!("Limits of job {job}:\n");
    rows_of(&mut out, &t.job);
    for (table, limits) in &t.tables {
        out.push_str(&format!("Table {table} (also):\n"));
        rows_of(&mut out, limits);
    }
    out.push_str(&format!(
        "Throttled so far: reading {:.1} s, writing {:.1} s (summed over pipelines)\n",
        t.throttled_read_seconds, t.throttled_write_seconds
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_print_as_a_table_with_unlimited_spelled_out() {
        let mut t = ThrottleSnapshot::default();
        t.job.read.snapshot = Rate::new(2000, 0);
        let mut own = Limits::default();
        own.write.diff = Rate::new(0, 1 << 20);
        t.tables.insert("orders".into(), own);
        t.throttled_read_seconds = 12.25;
        let out = render("abc", &t);
        assert!(out.starts_with("Limits of job abc:\n"), "{out}");
        assert!(
            out.lines().any(|l| l.contains("read snapshot")
                && l.contains("2000")
                && l.ends_with("unlimited")),
            "{out}"
        );
        assert!(out.contains("Table orders (also):"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.contains("write diff") && l.ends_with("1048576")),
            "{out}"
        );
        assert!(
            out.contains("reading 12.2 s") || out.contains("reading 12.3 s"),
            "{out}"
        );
    }
}
