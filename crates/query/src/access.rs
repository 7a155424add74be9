//! What a query (and, above it, a system) reads and writes, and when two of them conflict
//! (see [`FilteredAccess`]).

use std::any::TypeId;
use std::fmt;

use folio_archetype::Entity;

/// A component or resource type, with its name for messages.
#[derive(Clone, Copy, Debug)]
pub struct TypeKey {
    /// The type's id.
    pub id: TypeId,
    /// The type's name.
    pub name: &'static str,
}

impl TypeKey {
    /// The key of `T`.
    pub fn of<T: 'static>() -> Self {
        Self { id: TypeId::of::<T>(), name: std::any::type_name::<T>() }
    }
}

impl PartialEq for TypeKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for TypeKey {}

/// A set of types (small, so a vector).
#[derive(Clone, Debug, Default)]
pub struct TypeSet(Vec<TypeKey>);

impl TypeSet {
    /// Adds `key`; whether it was new.
    pub fn insert(&mut self, key: TypeKey) -> bool {
        if self.contains(key.id) {
            return false;
        }
        self.0.push(key);
        true
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: TypeId) -> bool {
        self.0.iter().any(|k| k.id == id)
    }

    /// The first type both sets hold.
    pub fn first_common(&self, other: &TypeSet) -> Option<TypeKey> {
        self.0.iter().copied().find(|k| other.contains(k.id))
    }

    /// The types.
    pub fn iter(&self) -> impl Iterator<Item = &TypeKey> {
        self.0.iter()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The components one query reads and writes, and the ones its matched entities must and must
/// not have.
///
/// Access is keyed by `TypeId`, so it can be computed without a world and before a component is
/// registered. A `FilteredAccess` also records the components every matched entity must have
/// (`with`) and must not have (`without`): two accesses whose `with` and `without` sets exclude
/// each other can never touch the same entity, so they do not conflict even if both write the
/// same component (`Query<&mut A, With<B>>` and `Query<&mut A, Without<B>>`).
#[derive(Clone, Debug, Default)]
pub struct FilteredAccess {
    /// Read (by `&T`, `Option<&T>`, `Added<T>`, `Changed<T>`).
    pub reads: TypeSet,
    /// Written (by `&mut T`, `Option<&mut T>`).
    pub writes: TypeSet,
    /// Every matched entity has these.
    pub with: TypeSet,
    /// No matched entity has these.
    pub without: TypeSet,
}

impl FilteredAccess {
    /// Records a read of `key`; an error if this query writes it.
    pub fn add_read(&mut self, key: TypeKey) -> Result<(), QueryError> {
        if self.writes.contains(key.id) {
            return Err(QueryError::Conflict { component: key.name });
        }
        self.reads.insert(key);
        Ok(())
    }

    /// Records a write of `key`; an error if this query already reads or writes it.
    pub fn add_write(&mut self, key: TypeKey) -> Result<(), QueryError> {
        if self.writes.contains(key.id) || self.reads.contains(key.id) {
            return Err(QueryError::Conflict { component: key.name });
        }
        self.writes.insert(key);
        Ok(())
    }

    /// Whether no entity can match both `self` and `other`.
    pub fn is_disjoint(&self, other: &FilteredAccess) -> bool {
        self.with.first_common(&other.without).is_some()
            || self.without.first_common(&other.with).is_some()
    }

    /// A component one of the two writes and the other reads or writes, unless the two can
    /// never match the same entity.
    pub fn conflict(&self, other: &FilteredAccess) -> Option<TypeKey> {
        if self.is_disjoint(other) {
            return None;
        }
        self.writes
            .first_common(&other.writes)
            .or_else(|| self.writes.first_common(&other.reads))
            .or_else(|| self.reads.first_common(&other.writes))
    }
}

/// What went wrong with a query.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueryError {
    /// The query would hand out a `&mut` to a component alongside another reference to it.
    Conflict {
        /// The component's type name.
        component: &'static str,
    },
    /// The entity is not alive.
    NoSuchEntity(Entity),
    /// The entity is alive but does not match the query.
    DoesNotMatch(Entity),
    /// `get_many_mut` was given the same entity twice.
    DuplicateEntity(Entity),
    /// `single` found no matching entity.
    NoEntities,
    /// `single` found more than one.
    MultipleEntities,
    /// The query state was built for another world.
    WorldMismatch,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Conflict { component } => write!(
                f,
                "conflicting access: the query writes {component} and also reads or writes it"
            ),
            Self::NoSuchEntity(e) => write!(f, "entity {e} does not exist"),
            Self::DoesNotMatch(e) => write!(f, "entity {e} does not match the query"),
            Self::DuplicateEntity(e) => write!(f, "entity {e} was asked for twice, mutably"),
            Self::NoEntities => write!(f, "the query matched no entity, expected exactly one"),
            Self::MultipleEntities => {
                write!(f, "the query matched more than one entity, expected exactly one")
            }
            Self::WorldMismatch => write!(f, "the query state was built for another world"),
        }
    }
}

impl std::error::Error for QueryError {}

#[cfg(test)]
mod tests {
    use super::*;

    struct A;
    struct B;

    #[test]
    fn reads_and_writes_conflict_within_one_query() {
        let mut access = FilteredAccess::default();
        access.add_read(TypeKey::of::<A>()).unwrap();
        access.add_read(TypeKey::of::<A>()).unwrap();
        let err = access.add_write(TypeKey::of::<A>()).unwrap_err();
        assert!(err.to_string().contains("A"), "{err}");
        access.add_write(TypeKey::of::<B>()).unwrap();
        assert!(access.add_read(TypeKey::of::<B>()).is_err());
        assert!(access.add_write(TypeKey::of::<B>()).is_err());
    }

    #[test]
    fn with_and_without_make_writers_disjoint() {
        let mut left = FilteredAccess::default();
        left.add_write(TypeKey::of::<A>()).unwrap();
        left.with.insert(TypeKey::of::<A>());
        let mut right = left.clone();
        assert_eq!(left.conflict(&right).map(|k| k.name), Some(std::any::type_name::<A>()));
        left.with.insert(TypeKey::of::<B>());
        right.without.insert(TypeKey::of::<B>());
        assert!(left.conflict(&right).is_none());
        assert!(right.conflict(&left).is_none());
    }
}
