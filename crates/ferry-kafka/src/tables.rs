//! [`KafkaTables`]: the [`Tables`] of a Kudu-to-Kafka job; and
//! [`ChangelogTables`], those of a Kafka-to-Kudu job. The source
//! tables are found as for a Kudu-to-Kudu job (`job.tableName`,
//! `job.tablePattern`, followed by id); each one is read by a
//! [`KuduSource`] and written by a [`KafkaSink`] to its topic.

use crate::changelog_sink::ChangelogSink;
use crate::config::{KafkaSinkConfig, KafkaSourceConfig};
use crate::metrics::KafkaMetrics;
use crate::sink::KafkaSink;
use crate::source::KafkaSource;
use ferry_engine::config::JobConfig;
use ferry_engine::connector::{TableRef, Tables};
use ferry_engine::{EngineError, TableId};
use ferry_kudu::scan_budget::ScanBudget;
use ferry_kudu::tables::discover_tables;
use ferry_kudu::KuduSource;
use kudu_client::KuduClient;
use std::sync::Arc;

/// The source tables of one Kudu-to-Kafka job.
pub struct KafkaTables {
    source: KuduClient,
    config: JobConfig,
    kafka: KafkaSinkConfig,
    metrics: Arc<KafkaMetrics>,
    /// What every table's diff scans may cost each source tablet server,
    /// together (`reader.diffScanBudget`).
    budget: Option<Arc<ScanBudget>>,
}

impl KafkaTables {
    /// Tables of `config`'s selection, read from `source`, written to
    /// Kafka as `kafka` says.
    pub fn new(source: KuduClient, config: JobConfig, kafka: KafkaSinkConfig) -> Self {
        KafkaTables {
            budget: ScanBudget::from_reader(&config.reader).map(Arc::new),
            source,
            config,
            kafka,
            metrics: Arc::default(),
        }
    }

    /// Counts what the job's sinks do into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<KafkaMetrics>) -> Self {
        self.metrics = metrics;
        self
    }
}

impl Tables for KafkaTables {
    type Source = KuduSource;
    type Sink = KafkaSink;

    async fn discover(&self, known: &[TableRef]) -> Result<Vec<TableRef>, EngineError> {
        discover_tables(&self.source, &self.config, known).await
    }

    fn connect(&self, table: &TableRef) -> Result<(KuduSource, KafkaSink), EngineError> {
        let source = KuduSource::for_table(self.source.clone(), table, self.config.reader.clone())
            .with_budget(self.budget.clone());
        let sink = KafkaSink::new(
            &self.kafka,
            self.source.clone(),
            table,
            &self.config.job_name,
        )
        .with_metrics(self.metrics.clone());
        Ok((source, sink))
    }
}

/// The one "table" of a Kafka-to-Kudu job: the changelog topic
/// (`job.sourceTopic`, its id and name) read by a [`KafkaSource`] and
/// applied by a [`ChangelogSink`] to the Kudu table `job.tableName` on the
/// sink cluster.
pub struct ChangelogTables {
    sink: KuduClient,
    config: JobConfig,
    kafka: KafkaSourceConfig,
    metrics: Arc<KafkaMetrics>,
}

impl ChangelogTables {
    /// The job of `config`, reading the changelog `kafka` describes and
    /// writing through `sink`.
    pub fn new(sink: KuduClient, config: JobConfig, kafka: KafkaSourceConfig) -> Self {
        ChangelogTables {
            sink,
            config,
            kafka,
            metrics: Arc::default(),
        }
    }

    /// Counts what the job's source and sink do into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<KafkaMetrics>) -> Self {
        self.metrics = metrics;
        self
    }
}

impl Tables for ChangelogTables {
    type Source = KafkaSource;
    type Sink = ChangelogSink;

    async fn discover(&self, _known: &[TableRef]) -> Result<Vec<TableRef>, EngineError> {
        Ok(vec![TableRef {
            id: TableId::new(format!("kafka:{}", self.kafka.topic)),
            name: self.kafka.topic.clone(),
        }])
    }

    fn connect(&self, _table: &TableRef) -> Result<(KafkaSource, ChangelogSink), EngineError> {
        let source =
            KafkaSource::new(&self.kafka, &self.config.job_name).with_metrics(self.metrics.clone());
        let sink = ChangelogSink::new(
            self.sink.clone(),
            &self.config.sink_table_name(),
            &self.kafka,
            &self.config.writer,
            &self.config.job_name,
        )?
        .with_metrics(self.metrics.clone());
        Ok((source, sink))
    }
}
