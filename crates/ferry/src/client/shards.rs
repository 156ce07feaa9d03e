//! `ferry list` of a worker of a sharded job: after Flink's sections,
//! every shard of the job — who runs it, its state and lag, each table's
//! lag — asked of each shard's owner (the REST address in its lease).

use super::Rest;
use crate::api::shards::{ShardOverview, ShardsOverview};
use std::collections::BTreeMap;

/// Prints the shards section when `rest` is a worker of a sharded job
/// (nothing otherwise). An owner that cannot be reached is said so.
pub(super) async fn print_shards(rest: &Rest) {
    let Ok(here) = rest.get::<ShardsOverview>("/ferry/shards").await else {
        return;
    };
    // Each owner's own answer carries its shards' state and lag.
    let mut answers: BTreeMap<String, Option<ShardsOverview>> = BTreeMap::new();
    if let Some(url) = &here.worker {
        answers.insert(url.clone(), Some(here.clone()));
    }
    for s in &here.shards {
        if let Some(url) = &s.rest_url {
            if !answers.contains_key(url) {
                let answer = rest
                    .at(url)
                    .get::<ShardsOverview>("/ferry/shards")
                    .await
                    .ok();
                answers.insert(url.clone(), answer);
            }
        }
    }
    println!(
        "------------- Shards of {} ({} shards, {} workers) -------------",
        here.cluster_id,
        here.count,
        here.workers
            .iter()
            .filter(|w| w.owner.is_some() && !w.released)
            .count()
    );
    for s in &here.shards {
        let owned = s
            .rest_url
            .as_ref()
            .and_then(|url| answers.get(url).cloned().flatten())
            .and_then(|a| a.shards.into_iter().find(|o| o.index == s.index && o.here));
        println!("{}", shard_line(s, owned.as_ref()));
        for t in owned.iter().flat_map(|o| &o.tables) {
            println!("    {} : lag {}", t.name, lag(t.lag_ms));
        }
    }
    println!("--------------------------------------------------------------");
}

fn lag(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".to_string(), |ms| format!("{ms} ms"))
}

/// `shard 3 : <job id> : host/pid (http://…) generation 4 : RUNNING, lag 812 ms`.
fn shard_line(s: &ShardOverview, owned: Option<&ShardOverview>) -> String {
    let who = match (&s.owner, s.released) {
        (None, _) => "never run".to_string(),
        (Some(_), true) => "released, waiting for its next owner".to_string(),
        (Some(owner), false) => format!(
            "{owner} ({}) generation {}",
            s.rest_url.as_deref().unwrap_or("no REST API"),
            s.generation
        ),
    };
    let state = match owned {
        Some(o) => format!(
            "{}, lag {}",
            o.state.as_deref().unwrap_or("-"),
            lag(o.lag_ms)
        ),
        None if s.owner.is_some() && !s.released => "owner not reachable".to_string(),
        None => "-".to_string(),
    };
    format!("shard {} : {} : {who} : {state}", s.index, s.job_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(owner: Option<&str>, released: bool) -> ShardOverview {
        ShardOverview {
            index: 2,
            job_id: "j".into(),
            owner: owner.map(str::to_string),
            rest_url: owner.map(|_| "http://h:1".to_string()),
            generation: 3,
            released,
            here: false,
            state: None,
            lag_ms: None,
            tables: vec![],
        }
    }

    #[test]
    fn a_shard_line_says_who_runs_it_and_how_far_behind() {
        let mut running = shard(Some("w1/7"), false);
        running.state = Some("RUNNING".into());
        running.lag_ms = Some(812);
        assert_eq!(
            shard_line(&shard(Some("w1/7"), false), Some(&running)),
            "shard 2 : j : w1/7 (http://h:1) generation 3 : RUNNING, lag 812 ms"
        );
        assert_eq!(
            shard_line(&shard(Some("w1/7"), false), None),
            "shard 2 : j : w1/7 (http://h:1) generation 3 : owner not reachable"
        );
        assert_eq!(
            shard_line(&shard(Some("w1/7"), true), None),
            "shard 2 : j : released, waiting for its next owner : -"
        );
        assert_eq!(
            shard_line(&shard(None, false), None),
            "shard 2 : j : never run : -"
        );
    }
}
