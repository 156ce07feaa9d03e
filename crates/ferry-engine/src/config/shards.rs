//! The keys cutting a job into shards (`job.shards`,
//! `job.shardTabletsOver`); what a shard is and who owns what is
//! [`crate::shard`].

use super::option::{ConfigOption, ValueError};
use super::parse::{self, u32_at_least};
use super::section::Section;
use super::spec::ValueKind;

crate::config_section! {
    /// Keys cutting a job into shards.
    pub static SHARD_KEYS = Section::job("shards");
    /// `job.shards`.
    pub const SHARDS: ConfigOption<u32> = ConfigOption::new("job.shards", ValueKind::Count, u32_at_least::<1>, print_u32)
        .default_value("1")
        .doc("How many shards the job is cut into (like Flink's max parallelism or Kafka's partitions): each table (or, of a table split by job.shardTabletsOver, each hash bucket) belongs to one shard, and each shard runs as its own HA job with its own checkpoints, lease and metrics (docs/scale-out.md). Fixed when the job is created: a state of the job cannot be restored with another value. 1 = one job as before.");
    /// `job.shardTabletsOver`.
    pub const SHARD_TABLETS_OVER: ConfigOption<u32> = ConfigOption::new("job.shardTabletsOver", ValueKind::CountOrZero, parse::count_or_zero_u32, print_u32)
        .default_value("0")
        .doc("With job.shards above 1: a Kudu table whose hash partitioning has more than this many buckets (tablets per range) is split over the shards by bucket, instead of belonging to one shard (docs/scale-out.md). 0 = no table is split. Fixed when the job is created, like job.shards.");
    /// `job.shard`.
    pub const SHARD: ConfigOption<u32> = ConfigOption::new("job.shard", ValueKind::CountOrZero, parse::count_or_zero_u32, print_u32)
        .derived("none: the whole job")
        .blank_means_default()
        .doc("Run only this shard (0 to job.shards - 1) of the job, as its own job: its high-availability.cluster-id becomes <cluster-id or job.name>-shard-<k> (docs/scale-out.md). For one process per shard started by hand.");
}

fn print_u32(n: &u32) -> String {
    n.to_string()
}

/// `job.shards` and `job.shardTabletsOver` together: a split threshold
/// means nothing without shards, so it is refused rather than ignored.
pub(super) fn check(shards: u32, tablets_over: u32) -> Result<(), ValueError> {
    if shards == 1 && tablets_over > 0 {
        return Err(ValueError::Invalid(format!(
            "splits tables over shards, but job.shards is 1: set job.shards above 1, or leave {SHARD_TABLETS_OVER} at 0"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::{ha_job_id, ConfigError, JobConfig};
    use crate::shard::ShardSpec;

    fn config(extra: &[(&str, &str)]) -> Result<JobConfig, ConfigError> {
        let mut pairs = vec![
            ("job.sourceMasterAddresses", "a:7051"),
            ("job.sinkMasterAddresses", "b:7051"),
            ("job.tablePattern", "t.*"),
            ("job.checkpointsDirectory", "/tmp/ferry-shards"),
            ("job.name", "orders"),
        ];
        pairs.extend_from_slice(extra);
        JobConfig::from_named_pairs(pairs)
    }

    #[test]
    fn one_shard_by_default() {
        let c = config(&[]).expect("valid");
        assert_eq!((c.shards, c.shard_tablets_over, c.shard), (1, 0, None));
    }

    #[test]
    fn each_shard_is_its_own_ha_job() {
        let c = config(&[("job.shards", "3"), ("high-availability.type", "lease")]).expect("valid");
        let shards: Vec<JobConfig> = (0..3).map(|k| c.for_shard(k).expect("shard")).collect();
        for (k, s) in shards.iter().enumerate() {
            let id = format!("orders-shard-{k}");
            assert_eq!(s.shard, ShardSpec::new(k as u32, 3));
            assert_eq!(s.ha.cluster_id.as_deref(), Some(id.as_str()));
            assert_eq!(s.ha_job_id(), ha_job_id(&id));
            // The keys name the shard, so the shard's config reads back equal.
            let again = JobConfig::from_config(&s.keys).expect("read back");
            assert_eq!(&again, s);
            assert_eq!(
                s.keys.raw(&crate::config::SHARD),
                Some(k.to_string().as_str())
            );
            // Several shards publish no cuts (no sink time holds them all).
            assert_eq!(s.cuts_table, None);
            assert_eq!(s.job_name, "orders");
        }
        assert_ne!(shards[0].ha_job_id(), shards[1].ha_job_id());
        assert_ne!(shards[0].ha_job_id(), c.ha_job_id());
        // A given cluster id is the base; HA type none works the same.
        let c = config(&[
            ("job.shards", "2"),
            ("high-availability.cluster-id", "dr-east"),
        ])
        .expect("valid");
        let s = c.for_shard(1).expect("shard");
        assert_eq!(s.ha.cluster_id.as_deref(), Some("dr-east-shard-1"));
        // One shard keeps its cuts: it holds every table.
        let one = config(&[]).expect("valid").for_shard(0).expect("shard");
        assert_eq!(one.cuts_table.as_deref(), Some("ferry_cuts"));
        assert_eq!(one.ha.cluster_id.as_deref(), Some("orders-shard-0"));
    }

    #[test]
    fn job_shard_runs_one_shard_by_hand() {
        let by_hand = config(&[("job.shards", "3"), ("job.shard", "2")]).expect("valid");
        let whole = config(&[("job.shards", "3")]).expect("valid");
        assert_eq!(by_hand, whole.for_shard(2).expect("shard"));
        let err = config(&[("job.shards", "3"), ("job.shard", "3")]).expect_err("no shard 3");
        assert_eq!(err.key(), Some("job.shards"));
        let err = config(&[("job.shard", "x")]).expect_err("not a number");
        assert_eq!(err.key(), Some("job.shard"));
    }

    #[test]
    fn a_shard_the_job_has_not_is_an_error_naming_job_shards() {
        let c = config(&[("job.shards", "3")]).expect("valid");
        let err = c.for_shard(3).expect_err("no shard 3");
        assert_eq!(err.key(), Some("job.shards"));
        assert_eq!(
            err.to_string(),
            "there is no shard 3: job.shards is 3, so the shards are numbered 0 to 2"
        );
        let shard = c.for_shard(1).expect("shard");
        let err = shard.for_shard(0).expect_err("a shard of a shard");
        assert_eq!(
            err.to_string(),
            "this configuration is shard 1 of 3 already; shard 0 is made from the whole job's configuration (job.shards)"
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        for bad in ["0", "-1", "x", ""] {
            let err = config(&[("job.shards", bad)]).expect_err(bad);
            assert_eq!(err.key(), Some("job.shards"), "{bad}: {err}");
        }
        let err = config(&[("job.shardTabletsOver", "-2")]).expect_err("negative");
        assert_eq!(err.key(), Some("job.shardTabletsOver"));
        // A split threshold without shards means nothing.
        let err = config(&[("job.shardTabletsOver", "4")]).expect_err("no shards");
        assert_eq!(err.key(), Some("job.shardTabletsOver"));
        assert!(err.to_string().contains("job.shards is 1"), "{err}");
        let c = config(&[("job.shards", "2"), ("job.shardTabletsOver", "4")]).expect("valid");
        assert_eq!((c.shards, c.shard_tablets_over), (2, 4));
        // Continuous verify needs each table at one sink time.
        let err = config(&[
            ("job.shards", "2"),
            ("job.shardTabletsOver", "4"),
            ("job.verifyInterval", "10 min"),
        ])
        .expect_err("verify of split tables");
        assert_eq!(err.key(), Some("job.verifyInterval"));
        assert!(config(&[("job.shards", "2"), ("job.verifyInterval", "10 min")]).is_ok());
    }

    #[test]
    fn kafka_connectors_take_what_they_can_divide() {
        let kafka = |source: &str, sink: &str, extra: &[(&str, &str)]| {
            let mut pairs = vec![
                ("job.sourceType", source),
                ("job.sinkType", sink),
                ("job.tableName", "t"),
                ("job.checkpointsDirectory", "/tmp/ferry-shards"),
            ];
            if source == "kudu" {
                pairs.push(("job.sourceMasterAddresses", "a:7051"));
            }
            if sink == "kudu" {
                pairs.push(("job.sinkMasterAddresses", "b:7051"));
            }
            pairs.extend_from_slice(extra);
            JobConfig::from_named_pairs(pairs)
        };
        let err = kafka("kafka", "kudu", &[("job.shards", "2")]).expect_err("kafka source");
        assert_eq!(err.key(), Some("job.shards"), "{err}");
        assert!(kafka("kafka", "kudu", &[]).is_ok());
        // Kudu to Kafka: tables divided, never split.
        assert!(kafka("kudu", "kafka", &[("job.shards", "2")]).is_ok());
        let err = kafka(
            "kudu",
            "kafka",
            &[("job.shards", "2"), ("job.shardTabletsOver", "4")],
        )
        .expect_err("split into kafka");
        assert_eq!(err.key(), Some("job.shardTabletsOver"), "{err}");
    }
}
