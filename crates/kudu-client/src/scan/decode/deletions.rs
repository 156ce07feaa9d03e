//! A batch of deletions made from rows another scan returned: how a reader
//! that reconciles two tables (rows the copy has and the original lost)
//! hands those rows on as deleted, through the same write path as a diff
//! scan's deleted rows.

use super::{ColumnData, Data, RowBatch};
use crate::schema::cell::set_bit;
use crate::schema::DataType;
use crate::{Error, Result};
use bytes::Bytes;

impl RowBatch {
    /// Rows `rows` of this batch (indexes in it, in the order given), each
    /// with an IS_DELETED column set to true: appended last when the
    /// projection has none, so the table's key columns keep their
    /// positions and [`RowView::encoded_primary_key`](super::RowView)
    /// still works.
    pub fn deletions(&self, rows: &[usize]) -> Result<RowBatch> {
        if let Some(&bad) = rows.iter().find(|&&r| r >= self.num_rows) {
            return Err(Error::InvalidArgument(format!(
                "row {bad} of a batch of {} rows",
                self.num_rows
            )));
        }
        let schema = self.schema.with_is_deleted()?;
        let is_deleted = schema.is_deleted_index();
        let columns = schema
            .columns()
            .iter()
            .enumerate()
            .map(|(c, col)| {
                if Some(c) == is_deleted {
                    return ColumnData {
                        data: Bytes::from(vec![1u8; rows.len()]),
                        varlen: Bytes::new(),
                        non_null: None,
                    };
                }
                self.column_of(rows, c, col.data_type(), col.is_nullable())
            })
            .collect();
        Ok(RowBatch {
            schema,
            num_rows: rows.len(),
            data: Data::Columnar { columns },
            key_columns: self.key_columns.clone(),
        })
    }

    /// Column `c` of `rows` in the columnar layout.
    fn column_of(&self, rows: &[usize], c: usize, dt: DataType, nullable: bool) -> ColumnData {
        let mut data = Vec::new();
        let mut varlen = Vec::new();
        let mut non_null = nullable.then(|| vec![0u8; rows.len().div_ceil(8)]);
        if dt.is_var_len() {
            data.extend_from_slice(&0u32.to_le_bytes());
        }
        for (i, &r) in rows.iter().enumerate() {
            let cell = self.raw_cell_at(r, c);
            if let (Some(bitmap), Some(_)) = (non_null.as_mut(), cell) {
                set_bit(bitmap, i, true);
            }
            if dt.is_var_len() {
                varlen.extend_from_slice(cell.unwrap_or_default());
                data.extend_from_slice(&(varlen.len() as u32).to_le_bytes());
            } else {
                match cell {
                    Some(bytes) => data.extend_from_slice(bytes),
                    None => data.resize(data.len() + dt.size(), 0),
                }
            }
        }
        ColumnData {
            data: Bytes::from(data),
            varlen: Bytes::from(varlen),
            non_null: non_null.map(Bytes::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::pb;
    use crate::scan::RowBatch;
    use crate::schema::{ColumnSchema, DataType, Schema, Value};
    use bytes::Bytes;

    /// Rows (7, "ab"), (8, NULL), (9, "xyz") in the row-wise layout.
    fn batch() -> RowBatch {
        let schema = Schema::new(vec![
            ColumnSchema::builder("id", DataType::Int32)
                .build()
                .unwrap(),
            ColumnSchema::builder("name", DataType::String)
                .nullable(true)
                .build()
                .unwrap(),
        ])
        .unwrap();
        let mut rows = Vec::new();
        let cells: [(i32, Option<(u64, u64)>); 3] =
            [(7, Some((0, 2))), (8, None), (9, Some((2, 3)))];
        for (id, name) in cells {
            rows.extend_from_slice(&id.to_le_bytes());
            let (off, len) = name.unwrap_or((0, 0));
            rows.extend_from_slice(&off.to_le_bytes());
            rows.extend_from_slice(&len.to_le_bytes());
            rows.push(if name.is_none() { 0b10 } else { 0 });
        }
        let block = pb::RowwiseRowBlockPb {
            num_rows: Some(3),
            rows_sidecar: Some(0),
            indirect_data_sidecar: Some(1),
        };
        let side = [Bytes::from(rows), Bytes::from_static(b"abxyz")];
        RowBatch::from_rowwise(&schema, &block, &side).unwrap()
    }

    #[test]
    fn chosen_rows_come_back_deleted_with_their_cells() {
        let b = batch();
        assert!(b.rows().all(|r| !r.is_deleted()));
        let d = b.deletions(&[2, 1]).unwrap();
        assert_eq!(d.num_rows(), 2);
        assert!(d.rows().all(|r| r.is_deleted()));
        assert_eq!(
            d.to_values().unwrap(),
            vec![
                vec![Value::Int32(9), Value::from("xyz"), Value::Bool(true)],
                vec![Value::Int32(8), Value::Null, Value::Bool(true)],
            ]
        );
        assert_eq!(d.deletions(&[]).unwrap().num_rows(), 0);
        let e = b.deletions(&[3]).unwrap_err().to_string();
        assert!(e.contains("row 3 of a batch of 3 rows"), "{e}");
    }
}
