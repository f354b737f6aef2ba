-- mwp authority store, schema version 2: sealed audit logs (SPEC §6a, docs/postgres.md
-- "Sealed audit logs"). Applied once per schema, inside one transaction, by
-- PostgresAuthority::open.

-- One row per archived Group sealed under its Organization's policy. `artifact` is the whole
-- artifact as a file host writes `audit.mwpa` (`MWPAUDT1` | age ciphertext | manifest
-- trailer); `manifest` is the same signed manifest's canonical CBOR, kept beside it so that it
-- can be read (and stays readable after expiry) without reading the artifact. Once the
-- retention has passed, `mwp audit expire` sets `tombstone` (canonical CBOR of the signed
-- tombstone) and nulls `artifact` in one transaction.
CREATE TABLE mwp_audit (
    group_id       text    PRIMARY KEY REFERENCES mwp_groups (group_id),
    seq            bigint  NOT NULL CHECK (seq >= 1),
    sealed_at      bigint  NOT NULL,
    retain_until   bigint  NOT NULL,
    remove_plain   boolean NOT NULL,
    plain_removed  boolean NOT NULL DEFAULT false,
    manifest       bytea   NOT NULL,
    artifact       bytea,
    tombstone      bytea,
    CHECK ((artifact IS NULL) <> (tombstone IS NULL)),
    CHECK (remove_plain OR NOT plain_removed)
);
CREATE INDEX mwp_audit_retain_until ON mwp_audit (retain_until) WHERE artifact IS NOT NULL;

-- Removing a sealed Group's plain history deletes its event rows; its receipts stay (the final
-- snapshot holds them too), so a receipt now refers to its Group, not to its event row.
DO $$
DECLARE c text;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'mwp_receipts'::regclass
               AND confrelid = 'mwp_events'::regclass AND contype = 'f'
    LOOP
        EXECUTE format('ALTER TABLE mwp_receipts DROP CONSTRAINT %I', c);
    END LOOP;
END $$;
ALTER TABLE mwp_receipts ADD FOREIGN KEY (group_id) REFERENCES mwp_groups (group_id);
