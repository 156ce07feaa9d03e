//! Per-row identity for comparing tables: the CRC32C a tablet server's
//! Checksum RPC computes for a row ([`RowView::checksum`]), and the row's
//! encoded primary key ([`RowView::encoded_primary_key`]).
//!
//! The server's row checksum (docs/kudu-protocol.md#checksum) is the
//! CRC32C of, for each column of the scan's projection in projection
//! order: the column's position as a little-endian u32; for a nullable
//! column one byte, 1 for a value and 0 for NULL (then nothing more); the
//! value's in-memory bytes (little-endian fixed-width cells; the raw bytes
//! of STRING / BINARY / VARCHAR, no length). The cells of a decoded batch
//! are exactly those bytes, in both result layouts, so the client can
//! compute the same number from a streamed row.

use super::decode::RowView;
use crate::partition::key::encode_value;
use crate::schema::DataType;
use crate::{Error, Result};

impl RowView<'_> {
    /// The CRC32C the tablet server's Checksum RPC computes for this row
    /// over the scan's projection, so the wrapping sum of this over a
    /// snapshot scan equals [`ScanBuilder::checksum`] of the same scan.
    /// The IS_DELETED column of a diff scan is left out (the Checksum RPC
    /// has no diff mode).
    ///
    /// [`ScanBuilder::checksum`]: super::ScanBuilder::checksum
    pub fn checksum(&self) -> u32 {
        // Chained CRCs over the pieces equal the CRC of their concatenation,
        // so no per-row buffer is needed.
        let mut crc = 0u32;
        for (i, c) in self.schema().columns().iter().enumerate() {
            if c.data_type() == DataType::IsDeleted {
                continue;
            }
            crc = crc32c::crc32c_append(crc, &(i as u32).to_le_bytes());
            let cell = self.raw_cell(i);
            if c.is_nullable() {
                crc = crc32c::crc32c_append(crc, &[u8::from(cell.is_some())]);
            }
            if let Some(bytes) = cell {
                crc = crc32c::crc32c_append(crc, bytes);
            }
        }
        crc
    }

    /// The row's primary key in Kudu's key encoding (memcmp order equals
    /// key order; docs/kudu-protocol.md#key-encoding), as scan bounds and
    /// split keys use it. The scan's projection must contain every key
    /// column (anywhere); otherwise `Error::InvalidArgument` names the
    /// missing one.
    pub fn encoded_primary_key(&self) -> Result<Vec<u8>> {
        let keys = self.key_columns().as_ref().map_err(|why| {
            Error::InvalidArgument(format!("cannot encode the row's primary key: {why}"))
        })?;
        let schema = self.schema();
        let mut out = Vec::with_capacity(16 * keys.len());
        for (n, &i) in keys.iter().enumerate() {
            let c = &schema.columns()[i];
            encode_value(
                &mut out,
                c.data_type(),
                self.value_at(i)?,
                n + 1 == keys.len(),
            )?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use crate::pb;
    use crate::scan::RowBatch;
    use crate::schema::{ColumnSchema, Schema};
    use crate::DataType;

    fn schema() -> Schema {
        Schema::new(vec![
            ColumnSchema::builder("k", DataType::Int32).build().unwrap(),
            ColumnSchema::builder("s", DataType::String)
                .nullable(true)
                .build()
                .unwrap(),
        ])
        .unwrap()
    }

    /// One row-wise row: k = 7, s = "ab" or NULL.
    fn batch(null: bool) -> RowBatch {
        let mut row = 7i32.to_le_bytes().to_vec();
        row.extend_from_slice(&0u64.to_le_bytes());
        row.extend_from_slice(&(if null { 0u64 } else { 2 }).to_le_bytes());
        row.push(if null { 0b10 } else { 0 });
        let block = pb::RowwiseRowBlockPb {
            num_rows: Some(1),
            rows_sidecar: Some(0),
            indirect_data_sidecar: Some(1),
        };
        RowBatch::from_rowwise(
            &schema(),
            &block,
            &[Bytes::from(row), Bytes::from_static(b"ab")],
        )
        .unwrap()
    }

    #[test]
    fn checksum_hashes_positions_null_flags_and_cell_bytes() {
        let mut want = Vec::new();
        want.extend_from_slice(&0u32.to_le_bytes());
        want.extend_from_slice(&7i32.to_le_bytes());
        want.extend_from_slice(&1u32.to_le_bytes());
        want.push(1);
        want.extend_from_slice(b"ab");
        assert_eq!(batch(false).row(0).checksum(), crc32c::crc32c(&want));

        let mut null = Vec::new();
        null.extend_from_slice(&0u32.to_le_bytes());
        null.extend_from_slice(&7i32.to_le_bytes());
        null.extend_from_slice(&1u32.to_le_bytes());
        null.push(0);
        assert_eq!(batch(true).row(0).checksum(), crc32c::crc32c(&null));
    }

    #[test]
    fn a_batch_without_a_table_has_no_key() {
        let err = batch(false).row(0).encoded_primary_key().unwrap_err();
        assert!(err.to_string().contains("key is unknown"), "{err}");
    }
}
