//! Conversions between schemas and their protobuf messages
//! (`ColumnSchemaPB`, `SchemaPB`; docs/kudu-protocol.md#schema-messages).
//!
//! Defaults: Kudu keeps two default values per column. The master reports
//! the one new writes get in `write_default_value` and takes a new column's
//! default in `read_default_value` (the value older rows read as). A
//! [`ColumnSchema`] has one default: read from `write_default_value`
//! (falling back to `read_default_value`) and sent as `read_default_value`,
//! so a schema copied from one cluster re-creates the same default on
//! another. Values use the little-endian value encoding (raw bytes for
//! strings).
//!
//! Optional fields are sent only when they carry information (proto2
//! presence matters to the servers, docs/kudu-protocol.md#conventions).

use super::column::{ColumnSchema, ColumnSchemaBuilder};
use super::table::Schema;
use super::types::{Compression, DataType, Encoding, TypeAttributes};
use super::value::Value;
use crate::pb;
use crate::{Error, Result};

/// Which optional parts of a column go into a `ColumnSchemaPB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SchemaPbOptions {
    /// Master-assigned column ids (only meaningful for a schema read from
    /// the master; CreateTable / AlterTable / Write must omit them).
    pub ids: bool,
    /// Column comments.
    pub comments: bool,
    /// Default values of ordinary columns (virtual columns always carry
    /// theirs: the server requires it).
    pub defaults: bool,
    /// Encoding, compression and block size hints.
    pub storage: bool,
}

impl SchemaPbOptions {
    /// Everything, as the master reports a schema.
    pub(crate) const FULL: SchemaPbOptions = SchemaPbOptions {
        ids: true,
        comments: true,
        defaults: true,
        storage: true,
    };
    /// For CreateTable / AlterTable: no ids.
    pub(crate) const CREATE_TABLE: SchemaPbOptions = SchemaPbOptions {
        ids: false,
        ..Self::FULL
    };
    /// For `WriteRequestPB.schema`: no ids, no comments
    /// (docs/kudu-protocol.md#write-requests).
    pub(crate) const WRITE: SchemaPbOptions = SchemaPbOptions {
        ids: false,
        comments: false,
        defaults: true,
        storage: true,
    };
    /// For scan projections: name, type, nullability and type attributes,
    /// plus the IS_DELETED read default (docs/kudu-protocol.md#scan-messages
    /// and docs/kudu-protocol.md#diff-scans).
    pub(crate) const PROJECTION: SchemaPbOptions = SchemaPbOptions {
        ids: false,
        comments: false,
        defaults: false,
        storage: false,
    };
}

fn attr_u8(v: Option<i32>, what: &str, col: &str) -> Result<Option<u8>> {
    v.map(|x| {
        u8::try_from(x).map_err(|_| {
            Error::InvalidArgument(format!("column '{col}': {what} {x} is out of range"))
        })
    })
    .transpose()
}

impl ColumnSchema {
    /// Reads a `ColumnSchemaPB` (e.g. from GetTableSchema). Unsupported
    /// types (NESTED, Kudu-internal ones) give `Error::Unsupported`.
    pub(crate) fn from_pb(pb: &pb::ColumnSchemaPb) -> Result<ColumnSchema> {
        let name = pb.name.as_str();
        let data_type = DataType::from_wire(pb.r#type).map_err(|e| match e {
            Error::Unsupported(m) => Error::Unsupported(format!("column '{name}': {m}")),
            other => other,
        })?;
        let mut b = ColumnSchemaBuilder::new(name, data_type)
            .key(pb.is_key.unwrap_or(false))
            .nullable(pb.is_nullable.unwrap_or(false))
            .encoding(pb.encoding.map_or(Encoding::Auto, Encoding::from_wire))
            .compression(
                pb.compression
                    .map_or(Compression::Default, Compression::from_wire),
            )
            .immutable(pb.immutable.unwrap_or(false))
            .auto_incrementing(pb.is_auto_incrementing.unwrap_or(false));
        if let Some(a) = &pb.type_attributes {
            b = b.type_attributes(TypeAttributes {
                precision: attr_u8(a.precision, "precision", name)?,
                scale: attr_u8(a.scale, "scale", name)?,
                length: a
                    .length
                    .map(|l| {
                        u32::try_from(l).map_err(|_| {
                            Error::InvalidArgument(format!(
                                "column '{name}': VARCHAR length {l} is out of range"
                            ))
                        })
                    })
                    .transpose()?,
            });
        }
        if let Some(bytes) = pb
            .write_default_value
            .as_deref()
            .or(pb.read_default_value.as_deref())
        {
            let v = Value::decode(data_type, bytes).map_err(|e| {
                Error::InvalidArgument(format!("column '{name}': bad default value: {e}"))
            })?;
            b = b.default_value(v);
        }
        if let Some(bs) = pb.cfile_block_size {
            b = b.block_size(bs);
        }
        if let Some(c) = &pb.comment {
            b = b.comment(c.clone());
        }
        if let Some(id) = pb.id {
            b = b.id(id);
        }
        b.build()
    }

    /// Writes a `ColumnSchemaPB` with the parts `opts` selects.
    pub(crate) fn to_pb(&self, opts: SchemaPbOptions) -> Result<pb::ColumnSchemaPb> {
        let send_default = opts.defaults || self.data_type == DataType::IsDeleted;
        let read_default_value = match (&self.default_value, send_default) {
            // A NULL default is the same as no default.
            (Some(v), true) if !v.is_null() => {
                let mut bytes = Vec::new();
                v.as_ref().encode(self.data_type, &mut bytes)?;
                Some(bytes)
            }
            _ => None,
        };
        Ok(pb::ColumnSchemaPb {
            id: self.id.filter(|_| opts.ids),
            name: self.name.clone(),
            r#type: self.data_type.to_wire(),
            is_key: self.is_key.then_some(true),
            is_nullable: self.nullable.then_some(true),
            read_default_value,
            write_default_value: None,
            encoding: (opts.storage && self.encoding != Encoding::Auto)
                .then(|| self.encoding.to_wire()),
            compression: (opts.storage && self.compression != Compression::Default)
                .then(|| self.compression.to_wire()),
            cfile_block_size: self.block_size.filter(|_| opts.storage),
            type_attributes: self.type_attributes.map(|a| pb::ColumnTypeAttributesPb {
                precision: a.precision.map(i32::from),
                scale: a.scale.map(i32::from),
                // Lengths are ≤ 65535 (checked by the builder).
                length: a.length.map(|l| l as i32),
            }),
            comment: self.comment.clone().filter(|_| opts.comments),
            immutable: self.immutable.then_some(true),
            is_auto_incrementing: self.auto_incrementing.then_some(true),
        })
    }
}

impl Schema {
    /// Reads a `SchemaPB`.
    pub(crate) fn from_pb(pb: &pb::SchemaPb) -> Result<Schema> {
        Schema::new(
            pb.columns
                .iter()
                .map(ColumnSchema::from_pb)
                .collect::<Result<Vec<_>>>()?,
        )
    }

    /// Writes a `SchemaPB` with the parts `opts` selects.
    pub(crate) fn to_pb(&self, opts: SchemaPbOptions) -> Result<pb::SchemaPb> {
        Ok(pb::SchemaPb {
            columns: self.columns_to_pb(opts)?,
        })
    }

    /// The columns as `ColumnSchemaPB`s (e.g. `projected_columns` of a scan
    /// with [`SchemaPbOptions::PROJECTION`]).
    pub(crate) fn columns_to_pb(&self, opts: SchemaPbOptions) -> Result<Vec<pb::ColumnSchemaPb>> {
        self.columns().iter().map(|c| c.to_pb(opts)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ValueRef;

    fn table() -> Schema {
        Schema::new(vec![
            ColumnSchema::builder("id", DataType::Int64)
                .key(true)
                .id(10)
                .encoding(Encoding::BitShuffle)
                .build()
                .unwrap(),
            ColumnSchemaBuilder::decimal("price", 12, 3)
                .nullable(true)
                .default_value(Value::Decimal(-1500))
                .comment("in euros")
                .id(11)
                .build()
                .unwrap(),
            ColumnSchemaBuilder::varchar("code", 8)
                .default_value("zz")
                .compression(Compression::Lz4)
                .block_size(4096)
                .immutable(true)
                .id(12)
                .build()
                .unwrap(),
            ColumnSchema::builder("day", DataType::Date)
                .nullable(true)
                .id(13)
                .build()
                .unwrap(),
        ])
        .unwrap()
    }

    #[test]
    fn full_round_trip() {
        let s = table();
        let pb = s.to_pb(SchemaPbOptions::FULL).unwrap();
        assert_eq!(Schema::from_pb(&pb).unwrap(), s);
        let price = &pb.columns[1];
        assert_eq!(price.r#type, 16);
        assert_eq!(
            price.read_default_value.as_deref(),
            Some(&(-1500i64).to_le_bytes()[..])
        );
        assert_eq!(
            pb.columns[2].read_default_value.as_deref(),
            Some(&b"zz"[..])
        );
        assert_eq!(
            pb.columns[2].type_attributes.as_ref().unwrap().length,
            Some(8)
        );
    }

    #[test]
    fn optional_fields_only_when_meaningful() {
        let s = table();
        let pb = s.to_pb(SchemaPbOptions::WRITE).unwrap();
        let id = &pb.columns[0];
        assert_eq!(id.id, None);
        assert_eq!(id.is_key, Some(true));
        assert_eq!(id.is_nullable, None);
        assert_eq!(id.read_default_value, None);
        assert_eq!(id.encoding, Some(6));
        assert_eq!(id.compression, None);
        assert_eq!(id.immutable, None);
        assert_eq!(pb.columns[1].comment, None);
        assert_eq!(pb.columns[2].immutable, Some(true));
        let create = s.to_pb(SchemaPbOptions::CREATE_TABLE).unwrap();
        assert_eq!(create.columns[1].comment.as_deref(), Some("in euros"));
        assert_eq!(create.columns[1].id, None);
    }

    #[test]
    fn projection_with_is_deleted() {
        let s = table()
            .project(&["id", "code"])
            .unwrap()
            .with_is_deleted()
            .unwrap();
        let cols = s.columns_to_pb(SchemaPbOptions::PROJECTION).unwrap();
        assert_eq!(cols.len(), 3);
        assert_eq!(cols[0].is_key, None);
        assert_eq!(cols[1].read_default_value, None);
        assert_eq!(cols[1].compression, None);
        let d = &cols[2];
        assert_eq!((d.name.as_str(), d.r#type), ("is_deleted", 18));
        assert_eq!(d.is_nullable, None);
        assert_eq!(d.read_default_value.as_deref(), Some(&[0u8][..]));
    }

    #[test]
    fn reads_write_default_first_and_rejects_bad_input() {
        let mut pb = col_pb(5);
        pb.read_default_value = Some(1i32.to_le_bytes().to_vec());
        pb.write_default_value = Some(2i32.to_le_bytes().to_vec());
        let c = ColumnSchema::from_pb(&pb).unwrap();
        assert_eq!(c.default_value(), Some(&Value::Int32(2)));
        assert!(c.check_value(ValueRef::Int32(0)).is_ok());

        let mut bad = col_pb(5);
        bad.write_default_value = Some(vec![1, 2]);
        assert!(ColumnSchema::from_pb(&bad).is_err());
        assert!(matches!(
            ColumnSchema::from_pb(&col_pb(21)),
            Err(Error::Unsupported(m)) if m.contains("'c'")
        ));
        let mut bad = col_pb(15);
        bad.type_attributes = Some(pb::ColumnTypeAttributesPb {
            precision: Some(300),
            scale: Some(0),
            length: None,
        });
        assert!(ColumnSchema::from_pb(&bad).is_err());
        // Unknown encodings survive a round trip.
        let mut odd = col_pb(5);
        odd.encoding = Some(77);
        let c = ColumnSchema::from_pb(&odd).unwrap();
        assert_eq!(c.to_pb(SchemaPbOptions::FULL).unwrap().encoding, Some(77));
    }

    fn col_pb(t: i32) -> pb::ColumnSchemaPb {
        pb::ColumnSchemaPb {
            name: "c".into(),
            r#type: t,
            ..Default::default()
        }
    }
}
