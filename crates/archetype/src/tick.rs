//! Change-tick arithmetic shared by the world, its resources and the query layer: the age past
//! which a stored tick is clamped, and the wrapping "newer than" comparison.

/// How many ticks old a stored tick may get before [`World::check_change_ticks`] clamps it:
/// three quarters of the `u32` range, as bevy_ecs does, leaving a quarter for the time between
/// checks.
///
/// [`World::check_change_ticks`]: crate::World::check_change_ticks
pub const MAX_CHANGE_AGE: u32 = 3 * (u32::MAX / 4);

/// Whether `tick` is newer than `last_run`, both as seen from `this_run` (wrapping arithmetic:
/// the comparison holds across the `u32` wrap while both are within [`MAX_CHANGE_AGE`]).
#[inline]
pub fn is_newer(tick: u32, last_run: u32, this_run: u32) -> bool {
    this_run.wrapping_sub(last_run) > this_run.wrapping_sub(tick)
}

/// Clamps `tick` to at most [`MAX_CHANGE_AGE`] ticks before `now` (see
/// [`World::check_change_ticks`]).
///
/// [`World::check_change_ticks`]: crate::World::check_change_ticks
#[inline]
pub(crate) fn clamp_tick(tick: &mut u32, now: u32) {
    if now.wrapping_sub(*tick) > MAX_CHANGE_AGE {
        *tick = now.wrapping_sub(MAX_CHANGE_AGE);
    }
}
