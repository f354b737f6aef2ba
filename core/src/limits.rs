//! Configurable limits (SPEC §1). Going over one is `MALFORMED`, naming the limit.

/// The limits an authority or replica enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest command, canonical CBOR bytes.
    pub max_command_bytes: usize,
    /// Largest opaque payload, canonical CBOR bytes.
    pub max_payload_bytes: usize,
    /// Most dependencies (`after`) per work item.
    pub max_dependencies: usize,
    /// Most members in a group.
    pub max_members: usize,
    /// Most early events a replica buffers.
    pub max_buffered_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_command_bytes: 64 * 1024,
            max_payload_bytes: 32 * 1024,
            max_dependencies: 256,
            max_members: 10_000,
            max_buffered_events: 10_000,
        }
    }
}
