//! The allocator's whole state as plain data ([`EntitiesState`]): what a save writes and a
//! load restores so that ids, generations and the order of reuse carry over, and what a world
//! snapshot keeps beside its columns. Also [`Entities::try_alloc_exact`], which makes one given
//! id alive (a load into a world that has entities already, or a game that chose its ids).
//!
//! Locations are not part of the state: they belong to the layer above, which places each
//! alive entity again after a restore.

use std::fmt;
use std::num::NonZeroU32;

use super::{Entities, Entity, EntityLocation, EntityMeta};
use crate::error::StorageError;

/// Everything [`Entities`] hands out ids from, as plain data: see [`Entities::state`] and
/// [`Entities::try_restore_state`].
///
/// Each index ever used is alive, free (on the freelist) or retired (its generation reached
/// `u32::MAX` and it was freed once more): every index below `generations.len()` is in exactly
/// one of `alive` and `free`, or has generation `u32::MAX` and is in neither.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntitiesState {
    /// By index: the live entity's generation while the slot is alive, else the generation
    /// its next entity gets.
    pub generations: Vec<NonZeroU32>,
    /// The alive indices, in the order the layer above places them back (any order restores).
    pub alive: Vec<u32>,
    /// The freelist, oldest first: the order indices are reused in.
    pub free: Vec<u32>,
    /// How many of `free`'s entries, from the front, pending reservations take from; the rest
    /// were freed while reservations were pending and wait behind them. Equal to `free.len()`
    /// when `reserved` is 0.
    pub takeable: usize,
    /// Ids reserved ([`Entities::reserve`]) but not yet flushed. After a restore the same
    /// count is pending, so the next flush makes alive the ids the original's would have.
    pub reserved: usize,
}

/// Why an [`EntitiesState`] cannot be restored. Nothing changed when it could not.
#[derive(Debug)]
#[non_exhaustive]
pub enum EntitiesStateError {
    /// More indices than the allocator can hand out.
    TooManyIndices {
        /// The state's index count (or the count its pending reservations need).
        indices: usize,
        /// The allocator's [`Entities::max_entities`].
        max: usize,
    },
    /// An alive or free index past `generations`.
    IndexOutOfRange {
        /// The index.
        index: u32,
        /// The state's index count.
        indices: usize,
    },
    /// An index listed twice among `alive` and `free` together.
    ListedTwice {
        /// The index.
        index: u32,
    },
    /// An index neither alive nor free whose generation is not `u32::MAX` (only a retired
    /// slot is in neither list).
    Unaccounted {
        /// The index.
        index: u32,
    },
    /// `takeable` past the freelist's length, or short of it with no reservation pending.
    Takeable {
        /// The state's `takeable`.
        takeable: usize,
        /// The freelist's length.
        free: usize,
    },
    /// Memory for the metas or the freelist was refused.
    Storage(StorageError),
}

impl fmt::Display for EntitiesStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyIndices { indices, max } => {
                write!(f, "the entity state needs {indices} indices, the allocator has {max}")
            }
            Self::IndexOutOfRange { index, indices } => {
                write!(f, "entity index {index} is past the state's {indices} indices")
            }
            Self::ListedTwice { index } => {
                write!(f, "entity index {index} is listed twice among the alive and free ones")
            }
            Self::Unaccounted { index } => write!(
                f,
                "entity index {index} is neither alive, free nor retired (generation u32::MAX)"
            ),
            Self::Takeable { takeable, free } => write!(
                f,
                "{takeable} takeable freelist entries do not fit a freelist of {free} and the \
                 pending reservations"
            ),
            Self::Storage(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for EntitiesStateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Storage(e) => Some(e),
            _ => None,
        }
    }
}

/// Why [`Entities::try_alloc_exact`] cannot make an id alive. Nothing changed when it could not.
#[derive(Debug)]
#[non_exhaustive]
pub enum EntityIdError {
    /// The slot holds a live entity (this one; its generation may differ from the id asked for).
    Alive(Entity),
    /// The slot is reserved ([`Entities::reserve`]) and not yet flushed: it is not free.
    Reserved(Entity),
    /// The slot retired (its generation reached `u32::MAX`); it is never handed out again.
    Retired(Entity),
    /// The slot's next generation is past the one asked for: that id was alive once already
    /// and handing it out again would make its stale copies alive.
    Stale {
        /// The id asked for.
        requested: Entity,
        /// The id the slot hands out next.
        next: Entity,
    },
    /// The index is past what the allocator can hand out, or memory was refused.
    Storage(StorageError),
}

impl fmt::Display for EntityIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Alive(e) => write!(f, "entity {e} is alive in that slot"),
            Self::Reserved(e) => write!(
                f,
                "entity {e} is reserved and not yet flushed; flush the world before spawning at it"
            ),
            Self::Retired(e) => write!(f, "the slot of entity {e} is retired"),
            Self::Stale { requested, next } => write!(
                f,
                "entity {requested} is stale: its slot hands out {next} next, and an id is never \
                 handed out twice"
            ),
            Self::Storage(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for EntityIdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Storage(e) => Some(e),
            _ => None,
        }
    }
}

/// `EntitiesState::marks`' mark of an alive index (a free one is `FREE_MARK`, a retired 0).
const ALIVE: u8 = 1;
const FREE_MARK: u8 = 2;

impl EntitiesState {
    /// Checks the state's own rules (each index alive, free or retired; `takeable` in range),
    /// as [`Entities::try_restore_state`] does before it changes anything, but for the
    /// allocator's capacity.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check(&self) -> Result<(), EntitiesStateError> {
        self.marks().map(drop)
    }

    /// By index: [`ALIVE`], [`FREE_MARK`] or 0 (retired), after checking the rules.
    fn marks(&self) -> Result<Vec<u8>, EntitiesStateError> {
        let n = self.generations.len();
        let mut seen = vec![0u8; n];
        for (list, mark) in [(&self.alive, ALIVE), (&self.free, FREE_MARK)] {
            for &index in list {
                let slot = seen
                    .get_mut(index as usize)
                    .ok_or(EntitiesStateError::IndexOutOfRange { index, indices: n })?;
                if *slot != 0 {
                    return Err(EntitiesStateError::ListedTwice { index });
                }
                *slot = mark;
            }
        }
        if let Some(index) =
            (0..n).find(|&i| seen[i] == 0 && self.generations[i] != NonZeroU32::MAX)
        {
            return Err(EntitiesStateError::Unaccounted { index: index as u32 });
        }
        let free = self.free.len();
        if self.takeable > free || (self.reserved == 0 && self.takeable != free) {
            return Err(EntitiesStateError::Takeable { takeable: self.takeable, free });
        }
        Ok(seen)
    }
}

impl Entities {
    /// The allocator's state: generations, alive and free indices, pending reservations.
    /// `alive` is in index order.
    pub fn state(&self) -> EntitiesState {
        let metas = self.metas.as_slice();
        EntitiesState {
            generations: metas.iter().map(|meta| meta.generation).collect(),
            // `index < metas.len() <= u32::MAX`.
            alive: (0..metas.len() as u32).filter(|&i| metas[i as usize].is_alive()).collect(),
            free: self.free.iter().map(|entity| entity.index).collect(),
            takeable: self.free_len,
            reserved: self.reserved_len(),
        }
    }

    /// Every index's generation, in index order: [`EntitiesState::generations`] without
    /// collecting it (what a save writes).
    pub fn generations(&self) -> impl ExactSizeIterator<Item = NonZeroU32> + '_ {
        self.metas.as_slice().iter().map(|meta| meta.generation)
    }

    /// The freelist's indices, oldest first: [`EntitiesState::free`] without collecting it.
    pub fn free_indices(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        self.free.iter().map(|entity| entity.index)
    }

    /// [`EntitiesState::takeable`]: how many freelist entries pending reservations take from.
    pub fn takeable(&self) -> usize {
        self.free_len
    }

    /// Replaces the whole state with `state`: afterwards the allocator hands out, reserves and
    /// reuses ids exactly as the one `state` was taken from; `state.reserved` ids are pending
    /// again, the same ones. An entity alive now and in `state`, at the same generation, keeps
    /// its location; every other alive index is alive with location
    /// [`EntityLocation::INVALID`], for the caller to place.
    ///
    /// So a caller can restore into an allocator whose entities it has dropped (and place them
    /// all again), or undo a batch of spawns: free them, then restore the state taken before,
    /// and the entities that lived through it stay where they are.
    ///
    /// # Errors
    /// [`EntitiesStateError`] when `state` breaks one of its rules or memory is refused;
    /// nothing changed then.
    pub fn try_restore_state(&mut self, state: &EntitiesState) -> Result<(), EntitiesStateError> {
        let n = state.generations.len();
        let needs = n.saturating_add(state.reserved.saturating_sub(state.takeable));
        if needs > self.max_len {
            return Err(EntitiesStateError::TooManyIndices { indices: needs, max: self.max_len });
        }
        let seen = state.marks()?;
        // Room first: nothing below fails.
        if let Some(more) = n.checked_sub(self.metas.len()) {
            self.metas.try_reserve(more).map_err(EntitiesStateError::Storage)?;
        }
        self.reserve_free_room(n).map_err(EntitiesStateError::Storage)?;

        let meta_of = |i: usize| EntityMeta {
            generation: state.generations[i],
            location: if seen[i] == ALIVE {
                EntityLocation::INVALID
            } else {
                EntityLocation::FREED
            },
        };
        let old_len = self.metas.len();
        for (i, meta) in self.metas.as_mut_slice().iter_mut().take(n).enumerate() {
            // An entity alive before and after, at one generation, keeps its location.
            let kept = seen[i] == ALIVE
                && meta.holds(Entity { index: i as u32, generation: state.generations[i] });
            if !kept {
                *meta = meta_of(i);
            }
        }
        if n < old_len {
            // SAFETY:
            // - `n < old_len <= capacity()`.
            // - metas `[0, n)` are initialised; the rest are forgotten, which is all dropping
            //   them would do (`EntityMeta` is `Copy`, it has no drop).
            unsafe { self.metas.column.set_len(n) };
        }
        for i in old_len..n {
            if let Err(e) = self.metas.try_push(meta_of(i)) {
                unreachable!("room for every meta was made above: {e}");
            }
        }
        self.free.clear();
        self.free.extend(
            state
                .free
                .iter()
                .map(|&index| Entity { index, generation: state.generations[index as usize] }),
        );
        self.free_len = state.takeable;
        *self.reserved.get_mut() = state.reserved;
        self.len = state.alive.len();
        Ok(())
    }

    /// Makes `reserved` ids pending again, the first `takeable` freelist entries theirs to
    /// take: the last step of a restore whose caller places the alive entities with operations
    /// that flush reservations first (it restores with `reserved` 0 and `takeable` the
    /// freelist's length, places, then calls this). Only a state with no pending reservation
    /// takes it.
    ///
    /// # Errors
    /// [`EntitiesStateError::Takeable`] when `takeable` is past the freelist or, with no
    /// reservation, short of it, or a reservation is pending already;
    /// [`EntitiesStateError::TooManyIndices`] when the reservations need more indices than the
    /// allocator has. Nothing changed then.
    pub fn try_set_reserved(
        &mut self,
        reserved: usize,
        takeable: usize,
    ) -> Result<(), EntitiesStateError> {
        let free = self.free.len();
        if self.reserved_len() != 0 || takeable > free || (reserved == 0 && takeable != free) {
            return Err(EntitiesStateError::Takeable { takeable, free });
        }
        let needs = self.metas.len().saturating_add(reserved.saturating_sub(takeable));
        if needs > self.max_len {
            return Err(EntitiesStateError::TooManyIndices { indices: needs, max: self.max_len });
        }
        self.free_len = takeable;
        *self.reserved.get_mut() = reserved;
        Ok(())
    }

    /// Whether [`Self::try_alloc_exact`] would make `entity` alive, memory permitting: its
    /// error when it would not. Changes nothing.
    ///
    /// # Errors
    /// As [`Self::try_alloc_exact`], but for a refused commit.
    pub fn check_alloc_exact(&self, entity: Entity) -> Result<(), EntityIdError> {
        let index = entity.index as usize;
        let pending = self.reserved_len();
        if let Some(meta) = self.metas.get(index) {
            let current = Entity { index: entity.index, generation: meta.generation };
            if meta.is_alive() {
                return Err(EntityIdError::Alive(current));
            }
            let Some(pos) = self.free.iter().position(|e| e.index == entity.index) else {
                return Err(EntityIdError::Retired(current));
            };
            if pos < pending.min(self.free_len) {
                return Err(EntityIdError::Reserved(current));
            }
            if entity.generation < meta.generation {
                return Err(EntityIdError::Stale { requested: entity, next: current });
            }
            return Ok(());
        }
        let new = Entity { index: entity.index, generation: NonZeroU32::MIN };
        // Pending reservations of new indices stand for the next new indices, and a later
        // index would make them free (a gap): with any pending, no new index is taken.
        if pending > self.free_len {
            return Err(EntityIdError::Reserved(new));
        }
        if index >= self.max_len {
            return Err(EntityIdError::Storage(StorageError::CapacityExceeded {
                capacity: self.max_len,
                requested: index + 1,
            }));
        }
        Ok(())
    }

    /// Makes `entity` alive at location [`EntityLocation::INVALID`], for the caller to place:
    /// its slot must be free (on the freelist) or never used, and its generation at least the
    /// slot's next one.
    ///
    /// A free slot leaves the freelist; the other free slots keep their order, so the ids
    /// [`Self::try_alloc`] hands out afterwards are the same on every run. A never-used index
    /// past the last one makes the indices between free, at generation 1, at the back of the
    /// freelist in index order. The slot takes `entity`'s generation. A reserved id is not
    /// free.
    ///
    /// Removing a slot from the middle of the freelist costs a scan of it.
    ///
    /// # Errors
    /// [`EntityIdError`] naming why the id is not free (see [`Self::check_alloc_exact`]), or
    /// the commit error; nothing changed then.
    pub fn try_alloc_exact(&mut self, entity: Entity) -> Result<(), EntityIdError> {
        self.check_alloc_exact(entity)?;
        let index = entity.index as usize;
        if index < self.metas.len() {
            let pos = self.free.iter().position(|e| e.index == entity.index);
            let pos = pos.expect("check_alloc_exact found it on the freelist");
            self.free.remove(pos);
            if pos < self.free_len {
                self.free_len -= 1;
            }
            let meta = &mut self.metas[index];
            meta.generation = entity.generation;
            meta.location = EntityLocation::INVALID;
            self.len += 1;
            return Ok(());
        }
        let more = index + 1 - self.metas.len();
        self.metas.try_reserve(more).map_err(EntityIdError::Storage)?;
        self.reserve_free_room(index + 1).map_err(EntityIdError::Storage)?;
        let pending = self.reserved_len() > 0;
        for gap in self.metas.len()..index {
            let generation = NonZeroU32::MIN;
            let meta = EntityMeta { generation, location: EntityLocation::FREED };
            if let Err(e) = self.metas.try_push(meta) {
                unreachable!("room was made above: {e}");
            }
            // `gap < index < max_len <= u32::MAX`.
            self.free.push_back(Entity { index: gap as u32, generation });
            if !pending {
                self.free_len += 1;
            }
        }
        let meta = EntityMeta { generation: entity.generation, location: EntityLocation::INVALID };
        if let Err(e) = self.metas.try_push(meta) {
            unreachable!("room was made above: {e}");
        }
        self.len += 1;
        Ok(())
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
