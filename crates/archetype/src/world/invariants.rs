//! Memory statistics and the consistency check that the tests lean on.

use folio_storage::Fallback;

use super::rows::table_index;
use super::{MemoryStats, TableMemory, World};
use crate::component::ComponentId;
use crate::table::{Table, TableId};

impl World {
    /// Reserved / committed / used bytes per table and in total (tables and sparse sets).
    pub fn memory_stats(&self) -> MemoryStats {
        let mut stats = MemoryStats::default();
        for (i, table) in self.tables.iter().enumerate() {
            let (reserved, committed, used) = table.memory();
            stats.tables.push(TableMemory {
                table: TableId(i as u32),
                rows: table.len(),
                reserved,
                committed,
                used,
            });
            stats.reserved += reserved;
            stats.committed += committed;
            stats.used += used;
        }
        for set in self.sparse_sets.iter().flatten() {
            let (reserved, committed, used) = set.memory();
            stats.reserved += reserved;
            stats.committed += committed;
            stats.used += used;
        }
        let (reserved, committed, _) = self.entities.memory();
        stats.reserved += reserved;
        stats.committed += committed;
        let fallbacks = self
            .tables
            .iter()
            .flat_map(Table::all_columns)
            .chain(self.sparse_sets.iter().flatten().flat_map(|set| set.columns()))
            .map(|column| column.fallback())
            .chain(std::iter::once(self.entities.fallback()));
        for fallback in fallbacks {
            match fallback {
                Fallback::None => {}
                Fallback::Smaller => stats.smaller_reservations += 1,
                Fallback::HeapPages => stats.heap_page_columns += 1,
            }
        }
        stats
    }

    /// Checks every entity location, table length, sparse-set entry, archetype membership, and
    /// both sides of every registered relationship; panics with a description of the first broken one. A test and debugging aid: O(entities).
    pub fn check_invariants(&self) {
        let mut total = 0;
        for archetype in &self.archetypes {
            let table = &self.tables[archetype.table_id().index()];
            assert_eq!(
                archetype.is_disabled(),
                self.holds_disabling(archetype.components()),
                "archetype {:?}: disabled flag vs its components",
                archetype.id()
            );
            if !archetype.is_listed() {
                let owner = self.table_owner[archetype.table_id().index()];
                assert_eq!(owner, Some(archetype.id()), "unlisted archetype shares its table");
                assert_eq!(archetype.len(), table.len(), "unlisted archetype vs its table");
            }
            for (row, ae) in archetype.entities(table).iter().enumerate() {
                let loc = self.entities.location(ae.entity).unwrap_or_else(|| {
                    panic!("{} in archetype {:?} is dead", ae.entity, archetype.id())
                });
                assert_eq!(loc.archetype_id, archetype.id().0, "{}: archetype", ae.entity);
                assert_eq!(loc.archetype_row as usize, row, "{}: archetype row", ae.entity);
                assert_eq!(loc.table_row, ae.table_row, "{}: table row", ae.entity);
                assert_eq!(table.entities()[ae.table_row as usize], ae.entity, "table entity");
                for &c in archetype.sparse_components() {
                    assert!(self.sparse_set(c).is_some_and(|s| s.contains(ae.entity)), "sparse");
                }
            }
            total += archetype.len();
        }
        assert_eq!(total, self.entities.len(), "archetype entities vs live entities");
        for table in &self.tables {
            for column in table.columns() {
                assert_eq!(column.data().len(), table.len(), "column length");
                assert_eq!(column.added_ticks().len(), table.len(), "added ticks length");
                assert_eq!(column.changed_ticks().len(), table.len(), "changed ticks length");
            }
        }
        let table_rows: usize = self.tables.iter().map(Table::len).sum();
        assert_eq!(table_rows, self.entities.len(), "table rows vs live entities");
        for (t, table) in self.tables.iter().enumerate() {
            for (row, &e) in table.entities().iter().enumerate() {
                let loc = self.entities.location(e).unwrap_or_else(|| {
                    panic!("{e} in row {row} of table {t} is dead");
                });
                let table_of_loc = table_index(&self.archetypes, loc);
                assert_eq!((table_of_loc, loc.table_row as usize), (t, row), "{e}: row");
            }
        }
        for (c, set) in self.sparse_sets.iter().enumerate() {
            let Some(set) = set else { continue };
            assert_eq!(set.column().len(), set.len(), "sparse values length");
            assert_eq!(set.added_ticks().len(), set.len(), "sparse added ticks length");
            assert_eq!(set.changed_ticks().len(), set.len(), "sparse changed ticks length");
            for (dense, &e) in set.entities().iter().enumerate() {
                let loc = self.entities.location(e);
                let loc = loc.unwrap_or_else(|| panic!("sparse set {c} holds dead {e}"));
                assert_eq!(set.dense_index(e), Some(dense), "sparse set {c}: {e}'s mapping");
                let archetype = &self.archetypes[loc.archetype_id as usize];
                assert!(
                    archetype.sparse_components().contains(&ComponentId::new(c as u32)),
                    "sparse set {c} holds {e}, whose archetype lacks the component"
                );
            }
        }
        self.check_relationships();
    }
}
