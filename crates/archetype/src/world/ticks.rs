//! The world's change tick: reading and advancing it, and clamping every stored tick before it
//! gets too old to compare.

use std::sync::atomic::Ordering;

use super::World;
use crate::tick::clamp_tick;

impl World {
    /// The current change tick: what writes made now (spawns, inserts, `get_mut`) are stamped
    /// with.
    #[inline]
    pub fn change_tick(&self) -> u32 {
        self.change_tick.load(Ordering::Relaxed)
    }

    /// The snapshot epoch (see `World::snapshot_epoch`'s field docs): what a
    /// [`SnapshotRing`](crate::SnapshotRing) compares its slots against.
    pub(crate) fn snapshot_epoch(&self) -> u64 {
        self.snapshot_epoch
    }

    /// Hands out the current tick for one run of a query or system and advances the world's
    /// tick past it, so every write made after the run is newer than every write made during
    /// it. Takes `&self` (an atomic), so parallel systems can each take their own tick.
    ///
    /// Ticks wrap around after 2^32 increments; [`World::check_change_ticks`] keeps old ticks
    /// comparable across the wrap.
    #[inline]
    pub fn increment_change_tick(&self) -> u32 {
        self.change_tick.fetch_add(1, Ordering::Relaxed)
    }

    /// [`World::increment_change_tick`] through `&mut self`: the same tick, without an atomic
    /// read-modify-write (a `lock xadd` costs a query over a few hundred rows about a sixth of
    /// its time). What a query run on a `&mut World` (`iter_mut`, `for_each_mut`) uses.
    #[inline]
    pub fn increment_change_tick_mut(&mut self) -> u32 {
        let tick = self.change_tick.get_mut();
        let this = *tick;
        *tick = this.wrapping_add(1);
        this
    }

    /// `tick` counted in 64 bits: how many ticks the world had handed out when it was current.
    /// Exact for ticks within 2^31 of the last [`World::check_change_ticks`] (before or after
    /// it), which a world checked as often as that method asks always is; what outlives the
    /// world's own stored ticks (a query state kept by the user, idle for 2^32 ticks) can tell
    /// its age from this where the 32-bit difference has wrapped.
    #[inline]
    pub fn absolute_tick(&self, tick: u32) -> u64 {
        let since_check = tick.wrapping_sub(self.checked_at) as i32;
        self.checked_total.wrapping_add_signed(i64::from(since_check))
    }

    /// Clamps every stored tick (components' and resources') older than [`MAX_CHANGE_AGE`] to
    /// exactly that age, so that `Added`/`Changed` comparisons stay right after the tick counter
    /// wraps. Cheap enough to run once every few million ticks (a game would call it, say, once
    /// a minute); a tick that is left unclamped for more than 2^32 - [`MAX_CHANGE_AGE`]
    /// increments may read as new.
    ///
    /// [`MAX_CHANGE_AGE`]: crate::MAX_CHANGE_AGE
    pub fn check_change_ticks(&mut self) {
        let now = self.change_tick();
        // Clamping rewrites ticks without a change: snapshots taken before are refilled whole.
        self.snapshot_epoch += 1;
        self.checked_total = self.absolute_tick(now);
        self.checked_at = now;
        let clamp = |ticks: &mut [u32]| ticks.iter_mut().for_each(|t| clamp_tick(t, now));
        for table in &mut self.tables {
            for column in table.columns_mut() {
                let (added, changed) = column.ticks_mut();
                clamp(added);
                clamp(changed);
            }
        }
        for set in self.sparse_sets.iter_mut().flatten() {
            let (added, changed) = set.ticks_mut();
            clamp(added);
            clamp(changed);
        }
        for resource in self.resources.values_mut() {
            resource.ticks_mut().clamp(now);
        }
    }
}
