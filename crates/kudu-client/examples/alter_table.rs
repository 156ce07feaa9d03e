//! Alters a table: adds a nullable `note` column with a default (or drops
//! it again if the table has one), changes a column's comment and the
//! table's comment, then prints the schema the master reports. The call
//! returns once every tablet has the new schema.
//!
//! ```text
//! cargo run -p kudu-client --example alter_table -- MASTERS TABLE
//! ```

use kudu_client::{AlterTableBuilder, ColumnDelta, ColumnSchema, DataType, KuduClient};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [masters, table] = args.as_slice() else {
        eprintln!("usage: alter_table MASTERS TABLE");
        std::process::exit(2);
    };
    if let Err(e) = run(masters, table).await {
        eprintln!("alter_table: {e}");
        std::process::exit(1);
    }
}

async fn run(masters: &str, name: &str) -> kudu_client::Result<()> {
    let client = KuduClient::new(&[masters])?;
    let table = client.open_table(name).await?;

    let mut alter = AlterTableBuilder::new().set_comment("altered by the alter_table example");
    if table.schema().column_by_name("note").is_some() {
        alter = alter.drop_column("note");
    } else {
        let note = ColumnSchema::builder("note", DataType::String)
            .nullable(true)
            .default_value("none")
            .build()?;
        alter = alter.add_column(note);
    }
    if let Some(first) = table.schema().columns().iter().find(|c| !c.is_key()) {
        let delta = ColumnDelta::new(first.name()).comment("changed by alter_table");
        alter = alter.alter_column(delta);
    }
    client.alter_table(&table, &alter).await?;

    // A handle keeps the schema it was opened with: open the table again.
    let table = client.open_table(name).await?;
    println!("{}", table.schema());
    println!("comment: {}", table.comment().unwrap_or(""));
    Ok(())
}
