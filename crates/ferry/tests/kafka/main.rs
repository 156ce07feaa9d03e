//! Kafka connectors against a real Kafka 4.x broker (KRaft) and real Kudu:
//! Kudu → Kafka (at-least-once and exactly-once) and Kafka → Kudu
//! (changelogs, dead letters, bounded runs, a round trip), and a table with
//! a non-unique primary key both ways.

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod non_unique;
mod sink;
mod source;

use std::sync::Arc;

use ferry_fixtures::process::{FerryCommand, FerryProcess};
use ferry_fixtures::Shared;
use ferry_testkit::KafkaBroker;

static BROKER: Shared<KafkaBroker> = Shared::new();

/// The broker the tests share while they run (a JVM start costs seconds
/// of both cores): each test uses topics, consumer groups and
/// transactional ids of its own.
fn broker() -> Arc<KafkaBroker> {
    BROKER
        .get(|| KafkaBroker::start(&format!("kafka-{}", std::process::id())).expect("Kafka broker"))
}

/// `ferry run <args>` with `env`, free REST and metrics ports, started.
fn run(args: &[String], env: &[(&str, &str)]) -> FerryProcess {
    FerryCommand::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("run")
        .args(args)
        .envs(env)
        .free_ports()
        .start()
}
