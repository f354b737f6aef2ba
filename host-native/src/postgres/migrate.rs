//! Schema migrations, applied on connect: the SQL files of `host-native/migrations/` in
//! order, each in its own transaction with its version recorded in `mwp_migrations`.
//! A session advisory lock serialises processes that start together; a database whose schema
//! is newer than this program is refused rather than written with old assumptions.

use postgres::Client;

use mwp_core::{Code, Error, Result};

use super::storage;

/// The migrations this program knows: (version, name, SQL).
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "init", include_str!("../../migrations/0001_init.sql")),
    (2, "audit", include_str!("../../migrations/0002_audit.sql")),
];

/// Advisory lock key held while migrating ("mwp-migr" in ASCII).
const MIGRATION_LOCK: i64 = 0x6d77_702d_6d69_6772;

/// Brings the schema (created if missing) up to the newest version; returns that version.
pub fn migrate(client: &mut Client, schema: Option<&str>) -> Result<i32> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .map_err(|e| storage("taking the migration lock", &e))?;
    let result = run(client, schema);
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .map_err(|e| storage("releasing the migration lock", &e));
    let version = result?;
    unlock?;
    Ok(version)
}

fn run(client: &mut Client, schema: Option<&str>) -> Result<i32> {
    if let Some(schema) = schema {
        client
            .batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS \"{schema}\"; SET search_path TO \"{schema}\";"
            ))
            .map_err(|e| storage("creating the schema", &e))?;
    }
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS mwp_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .map_err(|e| storage("creating mwp_migrations", &e))?;
    let current: i32 = client
        .query_one("SELECT coalesce(max(version), 0) FROM mwp_migrations", &[])
        .map_err(|e| storage("reading the schema version", &e))?
        .try_get(0)
        .map_err(|e| storage("reading the schema version", &e))?;
    let newest = MIGRATIONS.last().map_or(0, |m| m.0);
    if current > newest {
        return Err(Error::new(
            Code::Storage,
            format!(
                "the database schema is at version {current}, newer than this program's {newest}; run a newer mwp"
            ),
        ));
    }
    for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        let mut tx = client
            .transaction()
            .map_err(|e| storage("starting a migration", &e))?;
        tx.batch_execute(sql)
            .map_err(|e| storage(&format!("applying migration {version} ({name})"), &e))?;
        tx.execute(
            "INSERT INTO mwp_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .map_err(|e| storage("recording a migration", &e))?;
        tx.commit()
            .map_err(|e| storage("committing a migration", &e))?;
    }
    Ok(newest)
}
