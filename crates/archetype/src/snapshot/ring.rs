//! [`SnapshotRing`]: the last few frames of a world, for rollback, each saved as an incremental
//! snapshot into the buffers of the frame it replaces.
//!
//! # Keeping slots incremental across rollbacks
//! A snapshot filled by [`World::snapshot_into`] is refilled incrementally from what it holds
//! when that is an earlier state of the world on the same line of history: every table row
//! written since has a newer changed tick. A plain [`World::restore`] cannot tell which other
//! snapshots are still such states, so it makes all of them stale (refilled whole next time).
//! The ring can: restoring frame `R`, the frames older than `R` are earlier states of it, and
//! the frames newer than `R` (dropped, their buffers kept for the next saves) share its state
//! up to `R`'s tick, then hold their own writes, which have newer ticks in the slot. Each slot
//! keeps the tick up to which it agrees with the world (the older of its own and `R`'s), and
//! whether it holds writes past that (`forked`), and the next save into it copies the rows
//! newer than that tick in the world or in the slot.

use super::{Snapshot, SnapshotError};
use crate::world::{World, WorldId};

/// The last `k` frames of a world, saved incrementally, restored by how many frames back.
///
/// [`SnapshotRing::save`] fills the slot of the oldest frame (or a free one) with
/// [`World::snapshot_into`], which copies only what changed since that slot was filled;
/// [`SnapshotRing::restore`] puts the world back as it was `frames_back` saves ago and drops
/// the newer frames (the re-simulation saves them again). Slots stay incremental across
/// rollbacks (see the module docs), so a game that saves every frame and rolls back a few
/// copies, per frame, about what it wrote that frame.
///
/// ```
/// use folio_archetype::{SnapshotRing, World};
///
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// struct Position(f32);
///
/// let mut world = World::new();
/// world.register_snapshot_copy::<Position>();
/// let e = world.spawn((Position(0.0),));
/// let mut ring = SnapshotRing::new(8);
/// for frame in 0..10 {
///     ring.save(&world).unwrap(); // The state before frame `frame`.
///     world.get_mut::<Position>(e).unwrap().0 += 1.0;
/// }
/// assert_eq!(ring.len(), 8); // Frames 2..=9.
/// ring.restore(&mut world, 2).unwrap(); // Back to the state before frame 7.
/// assert_eq!(world.get::<Position>(e), Some(&Position(7.0)));
/// assert_eq!(ring.len(), 6); // Frames 8 and 9 are to be simulated again.
/// assert!(ring.restore(&mut world, 6).is_err()); // Frame 1 is gone.
/// ```
pub struct SnapshotRing {
    slots: Vec<Snapshot>,
    /// The slot of the newest frame (of the last one filled, while no frame is held).
    newest: usize,
    /// The frames held: the `len` slots up to `newest`, backwards.
    len: usize,
    /// The world the slots hold copies of, once one was saved.
    world: Option<WorldId>,
}

impl SnapshotRing {
    /// A ring that holds the last `frames` frames (at least 1); its slots take memory as they
    /// are first filled.
    ///
    /// # Panics
    /// When `frames` is 0.
    #[track_caller]
    pub fn new(frames: usize) -> Self {
        assert!(frames > 0, "SnapshotRing::new(0): a ring holds at least one frame");
        let mut slots = Vec::with_capacity(frames);
        slots.resize_with(frames, Snapshot::new);
        Self { slots, newest: frames - 1, len: 0, world: None }
    }

    /// The most frames it holds.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The frames it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no frame.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Saves the world as the newest frame, in the slot of the oldest one once the ring is
    /// full; copies only what changed since that slot was last filled (see
    /// [`World::snapshot_into`]). Advances the world's change tick by one.
    ///
    /// # Errors
    /// [`SnapshotError::WrongWorld`] when the ring holds another world's frames (nothing
    /// changed); as [`World::snapshot_into`] otherwise: on [`SnapshotError::NotRegistered`]
    /// nothing changed, on [`SnapshotError::Storage`] the oldest frame is lost when the ring
    /// was full (its slot was being refilled).
    pub fn save(&mut self, world: &World) -> Result<(), SnapshotError> {
        if let Some(id) = self.world.filter(|&id| id != world.id()) {
            return Err(SnapshotError::WrongWorld { snapshot: id, world: world.id() });
        }
        let k = self.slots.len();
        let slot = (self.newest + 1) % k;
        let result = world.snapshot_into(&mut self.slots[slot]);
        match result {
            Ok(()) => {
                self.newest = slot;
                self.len = (self.len + 1).min(k);
                self.world = Some(world.id());
            }
            Err(SnapshotError::NotRegistered { .. }) => {}
            // The slot is no whole copy now: if it held the oldest frame, that frame is gone.
            Err(_) => self.len = self.len.min(k - 1),
        }
        result
    }

    /// Puts the world back as it was `frames_back` saves ago (`0`: the newest frame) and drops
    /// the newer frames, keeping their buffers for the next saves: the frame restored is the
    /// newest now. See [`World::restore`] for what a restore puts back (everything) and how
    /// change ticks keep their age.
    ///
    /// # Errors
    /// [`SnapshotError::NotInRing`] when the ring does not hold that frame;
    /// [`SnapshotError::WrongWorld`] when its frames are another world's; as
    /// [`World::restore`] otherwise. The world and the ring are unchanged then.
    pub fn restore(&mut self, world: &mut World, frames_back: usize) -> Result<(), SnapshotError> {
        if frames_back >= self.len {
            return Err(SnapshotError::NotInRing { frames_back, held: self.len });
        }
        let k = self.slots.len();
        let index = (self.newest + k - frames_back) % k;
        let before = world.snapshot_epoch();
        world.restore(&self.slots[index])?;
        let after = world.snapshot_epoch();
        let restored = self.slots[index].base.filter(|b| b.epoch == before);
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(base) = &mut slot.base else { continue };
            if i == index {
                // The world is this slot's copy now.
                base.epoch = after;
                base.forked = false;
                continue;
            }
            // A slot that was an earlier state of the world before the restore agrees with
            // it up to the older of its tick and the restored frame's.
            if let Some(r) = restored.filter(|_| base.epoch == before) {
                base.epoch = after;
                if (base.since.wrapping_sub(r.since) as i32) > 0 {
                    base.since = r.since;
                    base.forked = true;
                }
            }
        }
        self.newest = index;
        self.len -= frames_back;
        Ok(())
    }

    /// The snapshot of the frame `frames_back` saves ago (`0`: the newest), if the ring holds
    /// it: to read its costs ([`Snapshot::filled_bytes`]) or restore it by hand.
    pub fn get(&self, frames_back: usize) -> Option<&Snapshot> {
        let k = self.slots.len();
        (frames_back < self.len).then(|| &self.slots[(self.newest + k - frames_back) % k])
    }

    /// Forgets every frame, keeping the buffers (and what they hold, so the next saves are
    /// still incremental).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl std::fmt::Debug for SnapshotRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotRing")
            .field("capacity", &self.slots.len())
            .field("len", &self.len)
            .field("world", &self.world)
            .finish()
    }
}
