//! Kafka connectors against a real Kafka 4.x broker (KRaft) and real Kudu:
//! Kudu → Kafka (at-least-once and exactly-once) and Kafka → Kudu
//! (changelogs, dead letters, bounded runs, a round trip).

mod sink;
mod source;
