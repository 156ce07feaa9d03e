//! Catalog calls on the leader master: list, open, create, alter, delete and
//! rename tables, wait for create/alter to finish, and read the server
//! clock. Each builds its request, calls [`MasterProxy::call`] and turns the
//! answer into the client's types.

use super::MasterProxy;
use crate::error::{Error, Result};
use crate::hybrid_time::HybridTime;
use crate::partition::schema::ColumnRefs;
use crate::partition::PartitionSchema;
use crate::pb;
use crate::pb::master::alter_table_request_pb::{self as alter, StepType};
use crate::pb::master::master_service as ms;
use crate::pb::master::TableIdentifierPb;
use crate::retry::Backoff;
use crate::row_ops::{self as ops, OpType};
use crate::schema::convert::SchemaPbOptions;
use crate::schema::Schema;
use crate::table::{AlterStep, AlterTableBuilder, ColumnDelta, KuduTable, TableBuilder};
use std::time::{Duration, Instant};

/// `MasterFeatures` numbers used here.
const FEATURE_RANGE_PARTITION_BOUNDS: u32 = 1;
const FEATURE_ADD_DROP_RANGE_PARTITIONS: u32 = 2;
const FEATURE_RANGE_SPECIFIC_HASH_SCHEMA: u32 = 8;

/// One entry of `list_tables`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableSummary {
    /// The table id.
    pub id: String,
    /// The table name.
    pub name: String,
    /// Live rows, if the master knows.
    pub live_row_count: Option<u64>,
    /// Tablets, if the master says.
    pub num_tablets: Option<i32>,
    /// Replication factor, if the master says.
    pub num_replicas: Option<i32>,
}

/// One entry of `list_tablet_servers`: a tablet server as it registered
/// with the leader master.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TabletServerInfo {
    /// The server's permanent uuid (the one replicas name).
    pub uuid: String,
    /// Changes every time the server process starts: a different value
    /// means the server restarted (and its in-memory state, its metrics
    /// among it, started over).
    pub instance_seqno: i64,
    /// `host:port` of its RPC endpoints.
    pub rpc_addresses: Vec<String>,
    /// `host:port` of its embedded web server (status pages, `/metrics`).
    pub http_addresses: Vec<String>,
    /// Whether that web server speaks HTTPS.
    pub https_enabled: bool,
    /// Milliseconds since its last heartbeat to the master, if known.
    pub millis_since_heartbeat: Option<i32>,
    /// What the server reported as its software version
    /// (`kudu 1.18.1 (rev …)`); empty if nothing.
    pub software_version: String,
}

impl TabletServerInfo {
    /// A server known only by its uuid: no addresses, sequence number 0,
    /// no version (set the fields that matter).
    pub fn new(uuid: impl Into<String>) -> Self {
        TabletServerInfo {
            uuid: uuid.into(),
            instance_seqno: 0,
            rpc_addresses: Vec::new(),
            http_addresses: Vec::new(),
            https_enabled: false,
            millis_since_heartbeat: None,
            software_version: String::new(),
        }
    }
}

fn by_name(name: &str) -> TableIdentifierPb {
    TableIdentifierPb {
        table_id: None,
        table_name: Some(name.to_owned()),
    }
}

fn by_id(id: &str) -> TableIdentifierPb {
    TableIdentifierPb {
        table_id: Some(id.as_bytes().to_vec()),
        table_name: None,
    }
}

fn table_not_found(name: &str, e: Error) -> Error {
    match e {
        Error::TableNotFound(_) => Error::TableNotFound(name.to_owned()),
        other => other,
    }
}

/// Lists user tables whose name contains `filter` (all if empty).
pub(crate) async fn list_tables(
    m: &MasterProxy,
    filter: &str,
    timeout: Duration,
) -> Result<Vec<TableSummary>> {
    let req = pb::master::ListTablesRequestPb {
        name_filter: (!filter.is_empty()).then(|| filter.to_owned()),
        ..Default::default()
    };
    let resp = m.call::<ms::ListTables>(None, &req, timeout, &[]).await?;
    let mut tables: Vec<TableSummary> = resp
        .tables
        .into_iter()
        .map(|t| TableSummary {
            id: String::from_utf8_lossy(t.id.as_deref().unwrap_or_default()).into_owned(),
            name: t.name.unwrap_or_default(),
            live_row_count: t.live_row_count,
            num_tablets: t.num_tablets,
            num_replicas: t.num_replicas,
        })
        .collect();
    tables.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tables)
}

/// The tablet servers the leader master knows, sorted by uuid.
pub(crate) async fn list_tablet_servers(
    m: &MasterProxy,
    timeout: Duration,
) -> Result<Vec<TabletServerInfo>> {
    let req = pb::master::ListTabletServersRequestPb::default();
    let resp = m
        .call::<ms::ListTabletServers>(None, &req, timeout, &[])
        .await?;
    let addrs = |hps: &[pb::HostPortPb]| -> Vec<String> {
        hps.iter()
            .map(|hp| format!("{}:{}", hp.host, hp.port))
            .collect()
    };
    let mut servers: Vec<TabletServerInfo> = resp
        .servers
        .into_iter()
        .map(|e| {
            let reg = e.registration.unwrap_or_default();
            TabletServerInfo {
                uuid: String::from_utf8_lossy(&e.instance_id.permanent_uuid).into_owned(),
                instance_seqno: e.instance_id.instance_seqno,
                rpc_addresses: addrs(&reg.rpc_addresses),
                http_addresses: addrs(&reg.http_addresses),
                https_enabled: reg.https_enabled.unwrap_or(false),
                millis_since_heartbeat: e.millis_since_heartbeat,
                software_version: reg.software_version.clone().unwrap_or_default(),
            }
        })
        .collect();
    servers.sort_by(|a, b| a.uuid.cmp(&b.uuid));
    Ok(servers)
}

/// Opens a table by name: schema, partitioning and metadata.
pub(crate) async fn open_table(
    m: &MasterProxy,
    name: &str,
    timeout: Duration,
) -> Result<KuduTable> {
    let req = pb::master::GetTableSchemaRequestPb {
        table: by_name(name),
    };
    let resp = m
        .call::<ms::GetTableSchema>(Some(name), &req, timeout, &[])
        .await
        .map_err(|e| table_not_found(name, e))?;
    table_from_pb(name, resp)
}

/// Opens a table by id (so a rename in between does not matter).
pub(crate) async fn open_table_by_id(
    m: &MasterProxy,
    id: &str,
    timeout: Duration,
) -> Result<KuduTable> {
    let req = pb::master::GetTableSchemaRequestPb { table: by_id(id) };
    let resp = m
        .call::<ms::GetTableSchema>(Some(id), &req, timeout, &[])
        .await
        .map_err(|e| table_not_found(&format!("with id {id}"), e))?;
    table_from_pb(id, resp)
}

fn table_from_pb(name: &str, resp: pb::master::GetTableSchemaResponsePb) -> Result<KuduTable> {
    let missing = |what: &str| Error::Protocol {
        addr: "leader master".into(),
        message: format!("GetTableSchema for '{name}' has no {what}"),
    };
    let schema = Schema::from_pb(resp.schema.as_ref().ok_or_else(|| missing("schema"))?)?;
    let partition_schema = PartitionSchema::from_pb(
        resp.partition_schema
            .as_ref()
            .ok_or_else(|| missing("partition schema"))?,
        &schema,
    )?;
    let id = String::from_utf8_lossy(
        resp.table_id
            .as_deref()
            .ok_or_else(|| missing("table id"))?,
    )
    .into_owned();
    Ok(KuduTable::new(
        resp.table_name.unwrap_or_else(|| name.to_owned()),
        id,
        schema,
        partition_schema,
        resp.num_replicas.unwrap_or(0),
        resp.owner.filter(|o| !o.is_empty()),
        resp.comment.filter(|c| !c.is_empty()),
        resp.extra_configs.into_iter().collect(),
        resp.authz_token,
    ))
}

/// Creates a table and (unless told not to) waits until it is ready.
/// Returns the new table's id.
pub(crate) async fn create_table(
    m: &MasterProxy,
    b: &TableBuilder,
    timeout: Duration,
) -> Result<String> {
    let started = Instant::now();
    let partition_schema = b.partition.clone().build()?;
    let mut partition_pb = partition_schema.to_pb(ColumnRefs::Name)?;
    let mut bounds: Vec<(OpType, &crate::schema::Row)> = Vec::new();
    if b.has_custom_hash_ranges {
        // Servers refuse range bounds next to custom-hash ranges: every
        // range then travels as a custom range, the ordinary ones with an
        // explicit copy of the table-wide hash schema.
        if !b.split_rows.is_empty() {
            return Err(Error::InvalidArgument(
                "split rows cannot be combined with ranges that have their own hash schema".into(),
            ));
        }
        for ((lt, lower), (ut, upper)) in &b.range_partitions {
            partition_pb.custom_hash_schema_ranges.push(
                pb::partition_schema_pb::RangeWithHashSchemaPb {
                    range_bounds: Some(ops::encode(&b.schema, &[(*lt, lower), (*ut, upper)])?),
                    hash_schema: partition_pb.hash_schema.clone(),
                },
            );
        }
    } else {
        for ((lt, lower), (ut, upper)) in &b.range_partitions {
            bounds.push((*lt, lower));
            bounds.push((*ut, upper));
        }
    }
    for split in &b.split_rows {
        bounds.push((OpType::SplitRow, split));
    }
    let mut features = Vec::new();
    if !b.range_partitions.is_empty() && !b.has_custom_hash_ranges {
        features.push(FEATURE_RANGE_PARTITION_BOUNDS);
    }
    if b.has_custom_hash_ranges {
        features.push(FEATURE_RANGE_SPECIFIC_HASH_SCHEMA);
    }
    let req = pb::master::CreateTableRequestPb {
        name: b.name.clone(),
        schema: b.schema.to_pb(SchemaPbOptions::CREATE_TABLE)?,
        num_replicas: b.num_replicas,
        split_rows_range_bounds: (!bounds.is_empty())
            .then(|| ops::encode(&b.schema, &bounds))
            .transpose()?,
        partition_schema: Some(partition_pb),
        owner: b.owner.clone(),
        extra_configs: b.extra_configs.clone().into_iter().collect(),
        comment: b.comment.clone(),
        ..Default::default()
    };
    let resp = m
        .call::<ms::CreateTable>(Some(&b.name), &req, timeout, &features)
        .await?;
    let id = String::from_utf8_lossy(resp.table_id.as_deref().unwrap_or_default()).into_owned();
    if b.wait {
        wait_create_done(m, &b.name, timeout.saturating_sub(started.elapsed())).await?;
    }
    Ok(id)
}

async fn wait_create_done(m: &MasterProxy, name: &str, timeout: Duration) -> Result<()> {
    let req = pb::master::IsCreateTableDoneRequestPb {
        table: by_name(name),
    };
    poll_done(timeout, &format!("creating table '{name}'"), || async {
        let r = m
            .call::<ms::IsCreateTableDone>(Some(name), &req, timeout, &[])
            .await?;
        Ok(r.done.unwrap_or(false))
    })
    .await
}

async fn poll_done<F, Fut>(timeout: Duration, what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let start = Instant::now();
    let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
    let mut attempts = 0;
    loop {
        attempts += 1;
        if check().await? {
            return Ok(());
        }
        let delay = backoff.next_delay();
        if start.elapsed() + delay > timeout {
            return Err(Error::TimedOut {
                operation: what.to_owned(),
                attempts,
                elapsed: start.elapsed(),
                last: "not done yet".into(),
            });
        }
        tokio::time::sleep(delay).await;
    }
}

/// Alters `table` and waits until the change has reached every tablet.
pub(crate) async fn alter_table(
    m: &MasterProxy,
    table: &KuduTable,
    b: &AlterTableBuilder,
    timeout: Duration,
) -> Result<()> {
    let started = Instant::now();
    let mut features = Vec::new();
    let mut needs_schema = false;
    let mut steps = Vec::new();
    for step in &b.steps {
        steps.push(alter_step(table, step, &mut features, &mut needs_schema)?);
    }
    features.sort_unstable();
    features.dedup();
    let req = pb::master::AlterTableRequestPb {
        table: by_id(table.id()),
        alter_schema_steps: steps,
        new_table_name: b.new_name.clone(),
        schema: if needs_schema {
            Some(table.schema().to_pb(SchemaPbOptions::CREATE_TABLE)?)
        } else {
            None
        },
        new_extra_configs: b.new_extra_configs.clone().into_iter().collect(),
        new_table_owner: b.new_owner.clone(),
        new_table_comment: b.new_comment.clone(),
        ..Default::default()
    };
    m.call::<ms::AlterTable>(Some(table.name()), &req, timeout, &features)
        .await
        .map_err(|e| table_not_found(table.name(), e))?;
    let done_req = pb::master::IsAlterTableDoneRequestPb {
        table: by_id(table.id()),
    };
    let remaining = timeout.saturating_sub(started.elapsed());
    poll_done(
        remaining,
        &format!("altering table '{}'", table.name()),
        || async {
            let r = m
                .call::<ms::IsAlterTableDone>(Some(table.name()), &done_req, remaining, &[])
                .await?;
            Ok(r.done.unwrap_or(false))
        },
    )
    .await
}

/// One step of an alteration as `AlterTableRequestPB.Step`, noting the
/// master features it needs and whether the request must carry the schema
/// (range bounds are rows of it).
fn alter_step(
    table: &KuduTable,
    step: &AlterStep,
    features: &mut Vec<u32>,
    needs_schema: &mut bool,
) -> Result<alter::Step> {
    Ok(match step {
        AlterStep::AddColumn(col) => alter::Step {
            r#type: Some(StepType::AddColumn as i32),
            add_column: Some(alter::AddColumn {
                schema: col.to_non_key().to_pb(SchemaPbOptions::CREATE_TABLE)?,
            }),
            ..Default::default()
        },
        AlterStep::DropColumn(name) => alter::Step {
            r#type: Some(StepType::DropColumn as i32),
            drop_column: Some(alter::DropColumn {
                name: Some(name.clone()),
            }),
            ..Default::default()
        },
        AlterStep::RenameColumn(old, new) => alter::Step {
            r#type: Some(StepType::RenameColumn as i32),
            rename_column: Some(alter::RenameColumn {
                old_name: Some(old.clone()),
                new_name: Some(new.clone()),
            }),
            ..Default::default()
        },
        AlterStep::AddRange(((lt, lower), (ut, upper)), hash) => {
            *needs_schema = true;
            features.push(FEATURE_ADD_DROP_RANGE_PARTITIONS);
            let custom_hash_schema = hash.as_ref().map(|dims| {
                features.push(FEATURE_RANGE_SPECIFIC_HASH_SCHEMA);
                alter::CustomHashSchema {
                    hash_schema: dims.iter().map(hash_dimension_by_name).collect(),
                }
            });
            alter::Step {
                r#type: Some(StepType::AddRangePartition as i32),
                add_range_partition: Some(alter::AddRangePartition {
                    range_bounds: Some(ops::encode(table.schema(), &[(*lt, lower), (*ut, upper)])?),
                    dimension_label: None,
                    custom_hash_schema,
                }),
                ..Default::default()
            }
        }
        AlterStep::AlterColumn(d) => alter_column_step(table, d)?,
        AlterStep::DropRange(((lt, lower), (ut, upper))) => {
            *needs_schema = true;
            features.push(FEATURE_ADD_DROP_RANGE_PARTITIONS);
            alter::Step {
                r#type: Some(StepType::DropRangePartition as i32),
                drop_range_partition: Some(alter::DropRangePartition {
                    range_bounds: Some(ops::encode(table.schema(), &[(*lt, lower), (*ut, upper)])?),
                }),
                ..Default::default()
            }
        }
    })
}

/// An ALTER_COLUMN step: `d`'s changes, its new default encoded as a cell
/// of the column.
fn alter_column_step(table: &KuduTable, d: &ColumnDelta) -> Result<alter::Step> {
    let default_value = match &d.default {
        Some(Some(v)) => {
            let column = table.schema().column_by_name(&d.name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "cannot alter column '{}' of table '{}': no such column",
                    d.name,
                    table.name()
                ))
            })?;
            let mut bytes = Vec::new();
            v.as_ref().encode(column.data_type(), &mut bytes)?;
            Some(bytes)
        }
        _ => None,
    };
    Ok(alter::Step {
        r#type: Some(StepType::AlterColumn as i32),
        alter_column: Some(alter::AlterColumn {
            delta: Some(pb::master::ColumnSchemaDeltaPb {
                name: Some(d.name.clone()),
                new_name: d.new_name.clone(),
                default_value,
                remove_default: matches!(d.default, Some(None)).then_some(true),
                encoding: d.encoding.map(|e| e.to_wire()),
                compression: d.compression.map(|c| c.to_wire()),
                block_size: d.block_size,
                new_comment: d.comment.clone(),
                immutable: d.immutable,
            }),
        }),
        ..Default::default()
    })
}

/// A hash dimension (columns by name, buckets, seed) as the master takes it.
fn hash_dimension_by_name(
    (cols, n, seed): &(Vec<String>, u32, u32),
) -> pb::partition_schema_pb::HashBucketSchemaPb {
    pb::partition_schema_pb::HashBucketSchemaPb {
        columns: cols
            .iter()
            .map(|c| pb::ColumnIdentifierPb {
                identifier: Some(pb::column_identifier_pb::Identifier::Name(c.clone())),
            })
            .collect(),
        num_buckets: *n as i32,
        seed: (*seed != 0).then_some(*seed),
        hash_algorithm: None,
    }
}

/// Deletes a table.
pub(crate) async fn delete_table(m: &MasterProxy, name: &str, timeout: Duration) -> Result<()> {
    let req = pb::master::DeleteTableRequestPb {
        table: by_name(name),
        ..Default::default()
    };
    m.call::<ms::DeleteTable>(Some(name), &req, timeout, &[])
        .await
        .map_err(|e| table_not_found(name, e))?;
    Ok(())
}

/// Checks that the leader master supports an application feature (e.g.
/// `MasterFeatures.IGNORE_OPERATIONS` = 7): a master that does not know the
/// flag answers `ERROR_INVALID_REQUEST`.
pub(crate) async fn supports_feature(
    m: &MasterProxy,
    feature: u32,
    timeout: Duration,
) -> Result<bool> {
    let req = pb::master::PingRequestPb::default();
    match m.call::<ms::Ping>(None, &req, timeout, &[feature]).await {
        Ok(_) => Ok(true),
        Err(Error::Rpc {
            code: crate::error::RpcErrorCode::InvalidRequest,
            ..
        }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The leader master's current hybrid time (`GenericService.ServerClock`).
pub(crate) async fn server_clock(m: &MasterProxy, timeout: Duration) -> Result<HybridTime> {
    let req = pb::server::ServerClockRequestPb::default();
    let resp = m
        .call::<pb::server::generic_service::ServerClock>(None, &req, timeout, &[])
        .await?;
    resp.timestamp
        .map(HybridTime::from_raw)
        .ok_or_else(|| Error::Protocol {
            addr: "leader master".into(),
            message: "ServerClock answer has no timestamp".into(),
        })
}
