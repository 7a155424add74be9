//! Row bookkeeping shared by the structural operations: unlinking an entity from its archetype
//! and table row, fixing the location of the entity swapped into a hole, and borrowing two
//! tables (or archetypes) at once.

use folio_storage::{Entities, Entity, EntityLocation};

use super::MovePlan;
use crate::archetype::{Archetype, ArchetypeId, Edge};
use crate::table::Table;

/// Removes `loc`'s archetype row, fixing the location of the entity moved into it (none in an
/// unlisted archetype, whose rows move with the table's).
#[inline]
pub(super) fn unlink_archetype_row(
    entities: &mut Entities,
    archetypes: &mut [Archetype],
    loc: EntityLocation,
) {
    if let Some(moved) = archetypes[loc.archetype_id as usize].swap_remove(loc.archetype_row) {
        entities.location_mut(moved).expect("archetype entities are alive").archetype_row =
            loc.archetype_row;
    }
}

/// What a row move along `edge` (a table move with a plan) out of archetype `from` works with:
/// the move plan, the source table and the target table.
#[inline(always)]
pub(super) fn move_parts<'w>(
    move_plans: &'w [MovePlan],
    tables: &'w mut [Table],
    archetypes: &[Archetype],
    from: ArchetypeId,
    edge: Edge,
) -> (&'w MovePlan, &'w mut Table, &'w mut Table) {
    let from_table = archetypes[from.index()].table_id().index();
    let to_table = archetypes[edge.to.index()].table_id().index();
    let (src, dst) = two_mut(tables, from_table, to_table);
    (&move_plans[edge.plan as usize], src, dst)
}

/// The index of the table that `loc`'s archetype keeps its rows in (a location does not hold
/// it: the entity's meta stays 16 bytes, and a structural change reads the archetype anyway).
#[inline(always)]
pub(super) fn table_index(archetypes: &[Archetype], loc: EntityLocation) -> usize {
    archetypes[loc.archetype_id as usize].table_id().index()
}

/// Takes `entity`, at `loc` in `table`, out of its archetype, and fixes the location of the
/// entity that `table`'s swap-remove of `loc.table_row` is about to move into its place (the
/// caller does that swap-remove next).
///
/// Always inlined: [`World::despawn`]'s body is inlined into three callers, and out of line
/// this call costs each despawn about 30 instructions (world_profile despawn_1m).
#[inline(always)]
pub(super) fn unlink_row(
    entities: &mut Entities,
    archetypes: &mut [Archetype],
    table: &Table,
    entity: Entity,
    loc: EntityLocation,
) {
    unlink_archetype_row(entities, archetypes, loc);
    if let Some(&moved) = table.entities().last().filter(|&&m| m != entity) {
        fix_table_row(entities, archetypes, moved, loc.table_row);
    }
}

/// Records that `entity`'s table row is now `row` (after a swap-remove moved it), and its
/// archetype row too where the two are one (an unlisted archetype).
#[inline]
pub(super) fn fix_table_row(
    entities: &mut Entities,
    archetypes: &mut [Archetype],
    entity: Entity,
    row: u32,
) {
    let loc = entities.location_mut(entity).expect("table entities are alive");
    loc.table_row = row;
    loc.archetype_row = archetypes[loc.archetype_id as usize].set_table_row(loc.archetype_row, row);
}

/// Two distinct elements of a slice, mutably.
#[inline(always)]
pub(super) fn two_mut<T>(items: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    assert_ne!(a, b);
    if a < b {
        let (left, right) = items.split_at_mut(b);
        (&mut left[a], &mut right[0])
    } else {
        let (left, right) = items.split_at_mut(a);
        (&mut right[0], &mut left[b])
    }
}
