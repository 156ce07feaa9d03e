use super::*;

/// Rows taken from `limiter` in batches of `batch` over `span` of (paused)
/// time.
async fn rows_in(limiter: &Limiter, batch: u64, span: Duration) -> u64 {
    let end = Instant::now() + span;
    let mut rows = 0;
    while Instant::now() < end {
        limiter.acquire(batch, 0).await;
        rows += batch;
    }
    rows
}

fn within_10_percent(measured: u64, expected: u64) -> bool {
    let (m, e) = (measured as f64, expected as f64);
    (m - e).abs() <= e * 0.1
}

#[tokio::test(start_paused = true)]
async fn rows_per_second_hold_within_ten_percent_over_ten_seconds() {
    for (limit, batch) in [(1_000, 100), (2_000, 1_500), (50_000, 7)] {
        let limiter = Limiter::new(Rate::new(limit, 0));
        let rows = rows_in(&limiter, batch, Duration::from_secs(10)).await;
        assert!(
            within_10_percent(rows, limit * 10),
            "{rows} rows in 10 s at {limit}/s (batches of {batch})"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn bytes_per_second_hold_too_and_the_tighter_limit_wins() {
    // 1 MiB/s of 4 KiB batches of 10 rows: 2 560 rows/s, under 5 000.
    let limiter = Limiter::new(Rate::new(5_000, 1 << 20));
    let end = Instant::now() + Duration::from_secs(10);
    let mut bytes = 0u64;
    while Instant::now() < end {
        limiter.acquire(10, 4096).await;
        bytes += 4096;
    }
    assert!(within_10_percent(bytes, 10 << 20), "{bytes} bytes in 10 s");
}

#[tokio::test(start_paused = true)]
async fn a_change_takes_effect_at_once() {
    let limiter = Limiter::new(Rate::new(1_000, 0));
    let first = rows_in(&limiter, 100, Duration::from_secs(10)).await;
    limiter.set(Rate::new(4_000, 0));
    let second = rows_in(&limiter, 100, Duration::from_secs(10)).await;
    assert!(within_10_percent(first, 10_000), "{first}");
    assert!(within_10_percent(second, 40_000), "{second}");
    limiter.set(Rate::new(500, 0));
    let third = rows_in(&limiter, 100, Duration::from_secs(10)).await;
    assert!(within_10_percent(third, 5_000), "{third}");
}

#[tokio::test(start_paused = true)]
async fn unlimited_never_sleeps() {
    let limiter = Limiter::new(Rate::default());
    let start = Instant::now();
    for _ in 0..1_000 {
        assert_eq!(limiter.acquire(1_000_000, 1 << 30).await, Duration::ZERO);
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn lifting_the_limit_wakes_a_sleeper() {
    let limiter = Arc::new(Limiter::new(Rate::new(100, 0)));
    let sleeper = {
        let limiter = limiter.clone();
        // 10 000 rows at 100/s: 100 s of debt.
        tokio::spawn(async move { limiter.acquire(10_000, 0).await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!sleeper.is_finished());
    limiter.set(Rate::default());
    let slept = sleeper.await.expect("sleeper");
    assert!(slept >= Duration::from_secs(2), "{slept:?}");
    assert!(slept < Duration::from_secs(3), "{slept:?}");
}

#[tokio::test(start_paused = true)]
async fn a_raised_limit_pays_the_debt_at_the_new_rate() {
    let limiter = Arc::new(Limiter::new(Rate::new(100, 0)));
    let sleeper = {
        let limiter = limiter.clone();
        tokio::spawn(async move { limiter.acquire(1_000, 0).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    // 900 rows of debt left; at 900/s one more second.
    limiter.set(Rate::new(900, 0));
    let slept = sleeper.await.expect("sleeper");
    assert!(
        (Duration::from_millis(1_990)..=Duration::from_millis(2_010)).contains(&slept),
        "{slept:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn idle_time_allows_one_second_of_burst_only() {
    let limiter = Limiter::new(Rate::new(1_000, 0));
    tokio::time::sleep(Duration::from_secs(60)).await;
    // 1 000 tokens saved, not 60 000: the second thousand waits 1 s.
    assert_eq!(limiter.acquire(1_000, 0).await, Duration::ZERO);
    let slept = limiter.acquire(1_000, 0).await;
    assert!(slept >= Duration::from_millis(990), "{slept:?}");
}

fn read_snapshot_rows(rows: u64) -> LimitsUpdate {
    let mut update = LimitsUpdate::default();
    update.read.snapshot.rows_per_second = Some(rows);
    update
}

#[tokio::test(start_paused = true)]
async fn a_table_limit_applies_on_top_of_the_job_limit_and_time_is_counted() {
    let throttles = Arc::new(Throttles::new(Limits::default()));
    throttles.update(Some("t"), &read_snapshot_rows(1_000));
    let t = SplitThrottle::new(throttles.clone(), "t", WindowKind::Snapshot);
    let other = SplitThrottle::new(throttles.clone(), "u", WindowKind::Snapshot);
    let diff = SplitThrottle::new(throttles.clone(), "t", WindowKind::Diff);
    let start = Instant::now();
    for _ in 0..100 {
        other.read(1_000, 0).await;
        diff.read(1_000, 0).await;
        t.write(1_000, 0).await;
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "other table, diff, writes");
    for _ in 0..50 {
        t.read(100, 0).await;
    }
    // 5 000 rows at 1 000/s, the first 100 free.
    let took = start.elapsed();
    assert!(
        (Duration::from_millis(4_800)..=Duration::from_millis(5_100)).contains(&took),
        "{took:?}"
    );
    let snap = throttles.snapshot();
    assert_eq!(snap.tables["t"].read.snapshot, Rate::new(1_000, 0));
    assert!(snap.job.is_unlimited());
    assert!(within_10_percent(
        throttles.throttled(Direction::Read).as_millis() as u64,
        took.as_millis() as u64
    ));
    assert_eq!(throttles.throttled(Direction::Write), Duration::ZERO);
    // The job's limit, lower, governs too.
    throttles.update(None, &read_snapshot_rows(500));
    let before = Instant::now();
    for _ in 0..50 {
        t.read(100, 0).await;
    }
    let took = before.elapsed();
    assert!(took >= Duration::from_millis(9_500), "{took:?}");
    // All zero: the table has no limits of its own any more.
    throttles.update(Some("t"), &read_snapshot_rows(0));
    assert!(throttles.snapshot().tables.is_empty());
}

#[test]
fn an_update_replaces_only_what_it_gives_and_the_json_shape_is_strict() {
    let limits = Limits {
        read: WindowRates {
            snapshot: Rate::new(1, 2),
            diff: Rate::new(3, 4),
        },
        write: WindowRates {
            snapshot: Rate::new(5, 6),
            diff: Rate::new(7, 8),
        },
    };
    let update: LimitsUpdate =
        serde_json::from_str(r#"{"read": {"diff": {"bytesPerSecond": 40}}, "write": {"snapshot": {"rowsPerSecond": 0}}}"#)
            .expect("update");
    let updated = limits.updated(&update);
    assert_eq!(updated.read.snapshot, Rate::new(1, 2));
    assert_eq!(updated.read.diff, Rate::new(3, 40));
    assert_eq!(updated.write.snapshot, Rate::new(0, 6));
    assert_eq!(updated.write.diff, Rate::new(7, 8));
    let err = serde_json::from_str::<LimitsUpdate>(r#"{"read": {"snapshot": {"rows": 1}}}"#)
        .expect_err("unknown field");
    assert!(err.to_string().contains("rows"), "{err}");
    assert!(serde_json::from_str::<LimitsUpdate>(
        r#"{"read": {"snapshot": {"rowsPerSecond": -1}}}"#
    )
    .is_err());
    let shown = serde_json::to_value(limits).expect("json");
    assert_eq!(shown["write"]["diff"]["bytesPerSecond"], 8);
}
