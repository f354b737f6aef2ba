//! Maps keyed by [`Id`], looked up by hash.
//!
//! The Group state looks up a receipt and a work item on every command and event, in maps of
//! up to millions of entries. In a tree ordered by the identifiers' bytes each lookup costs a
//! few dozen string comparisons, about half of all replay time. [`IdMap`] is a hash table with
//! a fixed seed (the core has no randomness, and every host builds the same table) whose
//! values live behind an [`Arc`]: the table itself holds 32 bytes per entry, so growing it
//! moves little and leaves little empty space, which keeps a million receipts as small as in
//! a tree; and a replica's write set shares the rows it reports instead of copying them (a
//! value still shared when it next changes is copied then, see [`Arc::make_mut`]). The [`Arc`]
//! is `triomphe`'s: a strong count only, so its header is 8 bytes, not the standard one's 16
//! (a stored receipt's allocation is 128 bytes rather than 136, a smaller class for the
//! allocator; docs/decisions.md, "Group state lookups").
//!
//! The seed is public, so a member could pick identifiers whose hashes collide; members are
//! authenticated and can be removed, and the worst case is slower lookups, never a wrong
//! answer. Iteration follows the table, which no rule depends on: the canonical encoder sorts
//! map keys by their bytes whatever order they come in, and whatever needs identifier order
//! keeps it separately (see [`crate::work::WorkItems`]).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;

use foldhash::fast::FixedState;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::id::Id;

/// The shared pointer an [`IdMap`]'s values, and a replica's write-set rows, are held by.
pub use triomphe::Arc;

/// What an [`IdMap`] can be looked up by: an [`Id`] or any string.
pub trait Lookup {
    /// The text looked up.
    fn text(&self) -> &str;
}

impl Lookup for Id {
    fn text(&self) -> &str {
        self.as_str()
    }
}

impl Lookup for str {
    fn text(&self) -> &str {
        self
    }
}

/// A map from [`Id`] to `V`, looked up by hash (see the module doc).
#[derive(Clone, PartialEq, Eq)]
pub struct IdMap<V> {
    table: HashMap<Id, Arc<V>, FixedState>,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            table: HashMap::default(),
        }
    }
}

impl<V> IdMap<V> {
    /// An empty map.
    pub fn new() -> IdMap<V> {
        IdMap::default()
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> IdMap<V> {
        IdMap {
            table: HashMap::with_capacity_and_hasher(n, FixedState::default()),
        }
    }

    /// The value for `id`.
    pub fn get<Q: Lookup + ?Sized>(&self, id: &Q) -> Option<&V> {
        self.table.get(id.text()).map(|v| &**v)
    }

    /// The stored identifier and value for `id`.
    pub fn get_key_value<Q: Lookup + ?Sized>(&self, id: &Q) -> Option<(&Id, &V)> {
        self.table.get_key_value(id.text()).map(|(k, v)| (k, &**v))
    }

    /// The value for `id`, shared.
    pub fn get_shared<Q: Lookup + ?Sized>(&self, id: &Q) -> Option<&Arc<V>> {
        self.table.get(id.text())
    }

    /// The value for `id`, to change it (copied first if it is shared).
    pub fn get_mut<Q: Lookup + ?Sized>(&mut self, id: &Q) -> Option<&mut V>
    where
        V: Clone,
    {
        self.table.get_mut(id.text()).map(Arc::make_mut)
    }

    /// Whether `id` has a value.
    pub fn contains_key<Q: Lookup + ?Sized>(&self, id: &Q) -> bool {
        self.table.contains_key(id.text())
    }

    /// Sets the value for `id`; returns whether it replaced one.
    pub fn insert(&mut self, id: Id, value: V) -> bool {
        self.insert_shared(id, Arc::new(value))
    }

    /// Sets a shared value for `id`; returns whether it replaced one.
    pub fn insert_shared(&mut self, id: Id, value: Arc<V>) -> bool {
        self.table.insert(id, value).is_some()
    }

    /// The value for `id`, inserting the default first if there is none.
    pub fn get_or_default(&mut self, id: Id) -> &mut V
    where
        V: Default + Clone,
    {
        Arc::make_mut(self.table.entry(id).or_default())
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.table.clear();
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Entries, in table order (the same for the same history on every host, meaningful to
    /// none).
    pub fn iter(&self) -> impl Iterator<Item = (&Id, &V)> + '_ {
        self.table.iter().map(|(k, v)| (k, &**v))
    }

    /// Entries with their shared values, in table order.
    pub fn iter_shared(&self) -> impl Iterator<Item = (&Id, &Arc<V>)> + '_ {
        self.table.iter()
    }

    /// Values, in table order.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.table.values().map(|v| &**v)
    }
}

impl<V: fmt::Debug> fmt::Debug for IdMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Serialize> Serialize for IdMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // JSON in the table's (fixed-seed) order; the canonical encoder gets the entries in
        // canonical key order, so it need not move them into place.
        if serializer.is_human_readable() {
            serializer.collect_map(self.iter())
        } else {
            serializer.collect_map(crate::canonical::in_key_order(self.iter()))
        }
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for IdMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<IdMap<V>, D::Error> {
        struct Entries<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = IdMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map keyed by identifiers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IdMap<V>, A::Error> {
                // Room for the entries the input says it has (a decoder bounds its hint),
                // so a large table is built without rehashing as it grows.
                let mut table = HashMap::with_capacity_and_hasher(
                    map.size_hint().unwrap_or(0),
                    FixedState::default(),
                );
                while let Some((id, value)) = map.next_entry::<Id, V>()? {
                    match table.entry(id) {
                        Entry::Occupied(e) => {
                            return Err(serde::de::Error::custom(format!(
                                "{} appears twice",
                                e.key()
                            )))
                        }
                        Entry::Vacant(e) => {
                            e.insert(Arc::new(value));
                        }
                    }
                }
                Ok(IdMap { table })
            }
        }
        deserializer.deserialize_map(Entries(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::new(s).expect("valid")
    }

    #[test]
    fn looks_up_what_was_inserted_and_nothing_else() {
        let mut m = IdMap::new();
        for i in 0..1000 {
            assert!(!m.insert(id(&format!("a-{i}")), i));
        }
        assert_eq!(m.get("a-7"), Some(&7));
        assert!(m.insert(id("a-7"), 7000));
        assert_eq!(m.len(), 1000);
        assert_eq!(m.get("a-7"), Some(&7000));
        assert_eq!(m.get("a-999"), Some(&999));
        assert_eq!(m.get("a-1000"), None);
        assert_eq!(m.get("not an id"), None);
        assert!(!m.contains_key(""));
        *m.get_mut("a-3").expect("present") += 1;
        assert_eq!(m.get_key_value("a-3"), Some((&id("a-3"), &4)));
        // A shared value is copied when it changes; the holder keeps what it was given.
        let held = Arc::clone(m.get_shared("a-3").expect("present"));
        *m.get_mut("a-3").expect("present") += 1;
        assert_eq!((*held, m.get("a-3")), (4, Some(&5)));
    }
}
