//! TEMPORARY stand-in for `ferry_fixtures::{workload, compare}` (the faults
//! helper's modules) with the agreed API; deleted once they land.

pub mod workload {
    use kudu_client::write::{FlushMode, Operation, SessionOptions};
    use kudu_client::KuduClient;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[derive(Debug, Clone, Copy, Default, serde::Serialize)]
    pub struct WorkloadStats {
        pub applied: u64,
        pub failed: u64,
    }

    pub struct Workload {
        stop: Arc<AtomicBool>,
        task: tokio::task::JoinHandle<WorkloadStats>,
    }

    impl Workload {
        pub fn start(client: KuduClient, table: &str, ops_per_sec: u32, seed: u64) -> Workload {
            let stop = Arc::new(AtomicBool::new(false));
            let table = table.to_string();
            let flag = stop.clone();
            let task = tokio::spawn(async move {
                let mut stats = WorkloadStats::default();
                let Ok(t) = client.open_table(&table).await else {
                    return stats;
                };
                let Ok(mut session) = client.new_session_with(
                    SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground),
                ) else {
                    return stats;
                };
                let mut rng = StdRng::seed_from_u64(seed);
                let started = Instant::now();
                let mut done = 0u64;
                while !flag.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let due = (ops_per_sec as f64 * started.elapsed().as_secs_f64()) as u64;
                    while done < due {
                        done += 1;
                        let id = rng.gen_range(0..20_000i64);
                        let mut row = t.new_row();
                        let pick = rng.gen_range(0..10);
                        let r = (|| -> kudu_client::Result<()> {
                            row.set_i64("id", id)?;
                            if pick < 9 {
                                row.set_bool("b", rng.gen())?;
                                row.set_i8("i8", rng.gen())?;
                                row.set_i16("i16", rng.gen())?;
                                row.set_i32("i32", rng.gen())?;
                                row.set_i64("i64", rng.gen())?;
                                row.set_f32("f", rng.gen())?;
                                row.set_f64("d", rng.gen())?;
                                row.set_decimal("dec9", rng.gen_range(0..1_000_000), 2)?;
                                row.set_decimal("dec18", rng.gen_range(0..1_000_000_000), 4)?;
                                row.set_decimal("dec38", rng.gen::<i64>() as i128, 10)?;
                                row.set_str("s", &format!("s{}", rng.gen::<u32>()))?;
                                row.set_binary("bin", &rng.gen::<[u8; 8]>())?;
                                row.set_str("vc", "abc")?;
                                row.set_timestamp_micros("ts", rng.gen_range(0..1 << 50))?;
                                row.set_date("dt", rng.gen_range(0..20_000))?;
                            }
                            Ok(())
                        })();
                        if r.is_err() {
                            stats.failed += 1;
                            continue;
                        }
                        let op = match pick {
                            0..=5 => Operation::upsert(&t, row),
                            6..=8 => Operation::update_ignore(&t, row),
                            _ => Operation::delete_ignore(&t, row),
                        };
                        match session.apply(op).await {
                            Ok(_) => stats.applied += 1,
                            Err(_) => stats.failed += 1,
                        }
                    }
                }
                if session.flush().await.is_err() {
                    stats.failed += 1;
                }
                let _ = session.close().await;
                stats
            });
            Workload { stop, task }
        }

        pub async fn stop(self) -> WorkloadStats {
            self.stop.store(true, Ordering::Relaxed);
            self.task.await.unwrap_or_default()
        }
    }
}

pub mod compare {
    use kudu_client::KuduClient;

    pub struct TableDiff {
        pub source_rows: usize,
        pub sink_rows: usize,
        pub differences: Vec<String>,
    }

    impl TableDiff {
        pub fn is_equal(&self) -> bool {
            self.differences.is_empty()
        }
    }

    impl std::fmt::Display for TableDiff {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "{} source rows, {} sink rows, {} difference(s): {}",
                self.source_rows,
                self.sink_rows,
                self.differences.len(),
                self.differences
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    }

    pub async fn compare_tables(
        source: &KuduClient,
        sink: &KuduClient,
        source_table: &str,
        sink_table: &str,
    ) -> TableDiff {
        let a = ferry_fixtures::read_all(source, source_table).await;
        let b = ferry_fixtures::read_all(sink, sink_table).await;
        let mut differences = Vec::new();
        for (k, v) in &a {
            match b.get(k) {
                None => differences.push(format!("id={k} missing in sink")),
                Some(w) if w != v => differences.push(format!("id={k} differs")),
                _ => {}
            }
        }
        for k in b.keys() {
            if !a.contains_key(k) {
                differences.push(format!("id={k} only in sink"));
            }
        }
        TableDiff {
            source_rows: a.len(),
            sink_rows: b.len(),
            differences,
        }
    }
}

pub mod fault {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    fn sh(args: &[&str]) -> std::io::Result<()> {
        let out = Command::new(args[0]).args(&args[1..]).output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "{}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    pub struct NetNs {
        name: String,
        veth: String,
    }

    impl NetNs {
        pub fn create() -> std::io::Result<NetNs> {
            let pid = std::process::id();
            let name = format!("ferrysoak{pid}");
            let veth = format!("fs{pid}a");
            let peer = format!("fs{pid}b");
            let (x, y) = (200 + pid % 50, (pid / 50) % 250);
            let (a0, a1) = (format!("10.{x}.{y}.1"), format!("10.{x}.{y}.2"));
            let ns = NetNs {
                name: name.clone(),
                veth: veth.clone(),
            };
            sh(&["ip", "netns", "add", &name])?;
            sh(&[
                "ip", "link", "add", &veth, "type", "veth", "peer", "name", &peer,
            ])?;
            sh(&["ip", "link", "set", &peer, "netns", &name])?;
            sh(&["ip", "addr", "add", &format!("{a0}/30"), "dev", &veth])?;
            sh(&["ip", "link", "set", &veth, "up"])?;
            let inns = |args: &[&str]| {
                let mut v = vec!["ip", "netns", "exec", name.as_str()];
                v.extend_from_slice(args);
                sh(&v)
            };
            inns(&["ip", "addr", "add", &format!("{a1}/30"), "dev", &peer])?;
            inns(&["ip", "link", "set", &peer, "up"])?;
            inns(&["ip", "link", "set", "lo", "up"])?;
            for k in [
                "net.ipv4.conf.all.route_localnet=1".to_string(),
                format!("net.ipv4.conf.{veth}.route_localnet=1"),
                "net.ipv4.conf.all.rp_filter=0".to_string(),
                format!("net.ipv4.conf.{veth}.rp_filter=0"),
            ] {
                sh(&["sysctl", "-q", "-w", &k])?;
            }
            for k in [
                "net.ipv4.conf.all.route_localnet=1".to_string(),
                format!("net.ipv4.conf.{peer}.route_localnet=1"),
                "net.ipv4.conf.all.rp_filter=0".to_string(),
                format!("net.ipv4.conf.{peer}.rp_filter=0"),
            ] {
                inns(&["sysctl", "-q", "-w", &k])?;
            }
            inns(&[
                "ip",
                "route",
                "del",
                "127.0.0.0/8",
                "dev",
                "lo",
                "table",
                "local",
            ])?;
            inns(&[
                "ip",
                "route",
                "replace",
                "local",
                "127.0.0.1/32",
                "dev",
                "lo",
                "table",
                "local",
            ])?;
            inns(&["ip", "route", "add", "127.0.0.0/8", "via", &a0, "src", &a1])?;
            Ok(ns)
        }

        pub fn name(&self) -> &str {
            &self.name
        }

        pub fn partition(&self, cidr: &str) -> std::io::Result<()> {
            let n = self.name.as_str();
            sh(&[
                "ip",
                "netns",
                "exec",
                n,
                "nft",
                "add",
                "table",
                "inet",
                "ferryfault",
            ])?;
            sh(&[
                "ip",
                "netns",
                "exec",
                n,
                "nft",
                "add",
                "chain",
                "inet",
                "ferryfault",
                "out",
                "{ type filter hook output priority 0; }",
            ])?;
            sh(&[
                "ip",
                "netns",
                "exec",
                n,
                "nft",
                "add",
                "rule",
                "inet",
                "ferryfault",
                "out",
                "ip",
                "daddr",
                cidr,
                "drop",
            ])
        }

        pub fn heal(&self) -> std::io::Result<()> {
            sh(&[
                "ip",
                "netns",
                "exec",
                &self.name,
                "nft",
                "delete",
                "table",
                "inet",
                "ferryfault",
            ])
        }
    }

    impl Drop for NetNs {
        fn drop(&mut self) {
            let _ = sh(&["ip", "link", "del", &self.veth]);
            let _ = sh(&["ip", "netns", "del", &self.name]);
        }
    }

    pub struct SmallFs {
        dir: PathBuf,
    }

    impl SmallFs {
        pub fn mount(size_bytes: u64) -> std::io::Result<SmallFs> {
            let dir = std::env::temp_dir().join(format!("ferry-soak-fs-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let d = dir.to_string_lossy().into_owned();
            sh(&[
                "mount",
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size_bytes}"),
                "tmpfs",
                &d,
            ])?;
            Ok(SmallFs { dir })
        }
        pub fn path(&self) -> &Path {
            &self.dir
        }
        pub fn make_unwritable(&self) -> std::io::Result<()> {
            sh(&["mount", "-o", "remount,ro", &self.dir.to_string_lossy()])
        }
        pub fn make_writable(&self) -> std::io::Result<()> {
            sh(&["mount", "-o", "remount,rw", &self.dir.to_string_lossy()])
        }
    }

    impl Drop for SmallFs {
        fn drop(&mut self) {
            let _ = sh(&["umount", "-l", &self.dir.to_string_lossy()]);
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}
