-- mwp authority store, schema version 1 (docs/postgres.md explains every table).
-- Applied once per schema, inside one transaction, by PostgresAuthority::open.

-- The authority key: one row. `secret_key` is NULL when the key is given by configuration
-- instead; `public_key` always pins which key this database's groups are signed with.
CREATE TABLE mwp_authority (
    id          smallint PRIMARY KEY CHECK (id = 1),
    public_key  text     NOT NULL CHECK (public_key ~ '^[0-9a-f]{64}$'),
    secret_key  bytea    CHECK (secret_key IS NULL OR length(secret_key) = 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per Group: its head. Advanced in the same transaction as each event row.
CREATE TABLE mwp_groups (
    group_id       text    PRIMARY KEY,
    org            text    NOT NULL,
    seq            bigint  NOT NULL CHECK (seq >= 1),
    head           text    NOT NULL CHECK (head ~ '^[0-9a-f]{64}$'),
    next_deadline  bigint,
    archived       boolean NOT NULL DEFAULT false
);
CREATE INDEX mwp_groups_next_deadline ON mwp_groups (next_deadline, group_id)
    WHERE next_deadline IS NOT NULL;

-- The log: canonical CBOR of each event. (group_id, seq) is the primary key, so two writers
-- can never store two events at one position, whatever they decided.
CREATE TABLE mwp_events (
    group_id  text    NOT NULL REFERENCES mwp_groups (group_id),
    seq       bigint  NOT NULL CHECK (seq >= 1),
    id        text    NOT NULL CHECK (id ~ '^[0-9a-f]{64}$'),
    kind      text    NOT NULL,
    bytes     bytea   NOT NULL,
    redacted  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (group_id, seq)
);

-- One receipt per (group, actor, action): canonical CBOR of the Receipt.
CREATE TABLE mwp_receipts (
    group_id  text   NOT NULL,
    actor     text   NOT NULL,
    action    text   NOT NULL,
    seq       bigint NOT NULL,
    bytes     bytea  NOT NULL,
    PRIMARY KEY (group_id, actor, action),
    FOREIGN KEY (group_id, seq) REFERENCES mwp_events (group_id, seq)
);

-- Signed snapshots: canonical CBOR of mwp.snapshot.v1 documents.
CREATE TABLE mwp_snapshots (
    group_id    text   NOT NULL REFERENCES mwp_groups (group_id),
    seq         bigint NOT NULL,
    state_hash  text   NOT NULL,
    bytes       bytea  NOT NULL,
    PRIMARY KEY (group_id, seq)
);
