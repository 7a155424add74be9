//! [`TypeIdMap`]: a hash map keyed by [`TypeId`] that does not hash again.
//!
//! A `TypeId` is already a hash of its type, so hashing it a second time (as `ahash` would)
//! only costs: every `World::get`, `spawn` and `insert` looks a type up here. The hasher keeps
//! the 64 bits `TypeId` writes as they are.

use std::any::TypeId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from [`TypeId`] to `V` with the pass-through [`TypeIdHasher`].
pub(crate) type TypeIdMap<V> = HashMap<TypeId, V, BuildHasherDefault<TypeIdHasher>>;

/// A hasher for `TypeId` keys: the hash is the value `TypeId` writes.
#[derive(Default)]
pub(crate) struct TypeIdHasher {
    hash: u64,
}

impl Hasher for TypeIdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.hash = value;
    }

    /// `TypeId` writes one `u64` today; should its `Hash` ever write bytes instead, they are
    /// folded in (a correct hash, if a slower one), never dropped.
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.hash = self.hash.rotate_left(8) ^ u64::from(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn distinct_types_hash_apart_and_each_type_hashes_alike() {
        let build = BuildHasherDefault::<TypeIdHasher>::default();
        let hash = |id: TypeId| build.hash_one(id);
        assert_eq!(hash(TypeId::of::<u32>()), hash(TypeId::of::<u32>()));
        assert_ne!(hash(TypeId::of::<u32>()), hash(TypeId::of::<u64>()));
        let mut map = TypeIdMap::default();
        map.insert(TypeId::of::<u8>(), 1);
        map.insert(TypeId::of::<String>(), 2);
        assert_eq!(map.get(&TypeId::of::<u8>()), Some(&1));
        assert_eq!(map.get(&TypeId::of::<String>()), Some(&2));
        assert_eq!(map.get(&TypeId::of::<i8>()), None);
    }
}
