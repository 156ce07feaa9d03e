//! [`KafkaTables`]: the [`Tables`] of a Kudu-to-Kafka job. The source
//! tables are found as for a Kudu-to-Kudu job (`job.tableName`,
//! `job.tablePattern`, followed by id); each one is read by a
//! [`KuduSource`] and written by a [`KafkaSink`] to its topic.

use crate::sink::KafkaSink;
use ferry_engine::config::{JobConfig, KafkaSinkConfig};
use ferry_engine::connector::{TableRef, Tables};
use ferry_engine::kudu_source::KuduSource;
use ferry_engine::kudu_tables::discover_tables;
use ferry_engine::EngineError;
use kudu_client::KuduClient;

/// The source tables of one Kudu-to-Kafka job.
pub struct KafkaTables {
    source: KuduClient,
    config: JobConfig,
    kafka: KafkaSinkConfig,
}

impl KafkaTables {
    /// Tables of `config`'s selection, read from `source`; `None` when the
    /// job's sink is not Kafka.
    pub fn new(source: KuduClient, config: JobConfig) -> Option<Self> {
        let kafka = config.sink.kafka()?.clone();
        Some(KafkaTables {
            source,
            config,
            kafka,
        })
    }
}

impl Tables for KafkaTables {
    type Source = KuduSource;
    type Sink = KafkaSink;

    async fn discover(&self, known: &[TableRef]) -> Result<Vec<TableRef>, EngineError> {
        discover_tables(&self.source, &self.config, known).await
    }

    fn connect(&self, table: &TableRef) -> Result<(KuduSource, KafkaSink), EngineError> {
        let source = KuduSource::for_table(self.source.clone(), table, self.config.reader.clone());
        let sink = KafkaSink::new(
            &self.kafka,
            self.source.clone(),
            table,
            &self.config.job_name,
        );
        Ok((source, sink))
    }
}
