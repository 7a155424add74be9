//! What a system touches: the component access of each of its queries, the resources it reads
//! and writes, and whether it reads or writes the whole world. Two systems conflict when one
//! writes what the other reads or writes; the executor never runs conflicting systems at once.

use folio_query::{FilteredAccess, TypeKey, TypeSet};

use crate::error::ScheduleError;

/// One system's access.
#[derive(Clone, Debug, Default)]
pub struct SystemAccess {
    /// Per query parameter: its access, and the parameter's name for messages.
    pub queries: Vec<(FilteredAccess, String)>,
    /// Resources read.
    pub resource_reads: TypeSet,
    /// Resources written.
    pub resource_writes: TypeSet,
    /// Reads the whole world (`&World`).
    pub world_read: bool,
    /// Has the world to itself (`fn(&mut World)`, sync points).
    pub exclusive: bool,
    /// Reserves entity ids (`Commands`): two systems that may reserve ids (this, or
    /// `world_read`) keep their order, so ids are handed out deterministically.
    pub reserves_entities: bool,
    /// Per parameter added so far, its name and its own access (a `ParamSet` has one entry per
    /// member): what a conflict message names as the other side.
    pub params: Vec<(String, SystemAccess)>,
}

impl SystemAccess {
    /// Adds a query parameter's access; an error naming both parameters if it conflicts with
    /// another query of the same system.
    pub fn add_query(
        &mut self,
        system: &str,
        access: FilteredAccess,
        param: String,
    ) -> Result<(), ScheduleError> {
        let queries = vec![(access, param.clone())];
        self.add_param(system, &[SystemAccess { queries, ..Self::default() }], param)
    }

    /// Adds the members of a `ParamSet` (`param`): each member's access is checked against the
    /// system's parameters so far, never against the other members (the set hands out one at a
    /// time); then the system's access takes the union of all of them, which is what the
    /// schedule orders it by and what later parameters are checked against.
    pub fn add_param_set(
        &mut self,
        system: &str,
        members: &[SystemAccess],
        param: String,
    ) -> Result<(), ScheduleError> {
        self.add_param(system, members, param)
    }

    /// Adds a resource read.
    pub fn add_resource_read(
        &mut self,
        system: &str,
        key: TypeKey,
        param: String,
    ) -> Result<(), ScheduleError> {
        self.add_resource(system, key, param, false)
    }

    /// Adds a resource write.
    pub fn add_resource_write(
        &mut self,
        system: &str,
        key: TypeKey,
        param: String,
    ) -> Result<(), ScheduleError> {
        self.add_resource(system, key, param, true)
    }

    /// Adds one resource parameter, reading or writing `key`.
    fn add_resource(
        &mut self,
        system: &str,
        key: TypeKey,
        param: String,
        write: bool,
    ) -> Result<(), ScheduleError> {
        let mut access = Self::default();
        let set = if write { &mut access.resource_writes } else { &mut access.resource_reads };
        set.insert(key);
        self.add_param(system, &[access], param)
    }

    /// Marks a read of the whole world; an error if the system writes anything.
    pub fn add_world_read(&mut self, system: &str) -> Result<(), ScheduleError> {
        let access = Self { world_read: true, ..Self::default() };
        self.add_param(system, &[access], "&World".to_owned())
    }

    /// Adds one parameter (`param`), whose access is the union of `parts`: each part is
    /// checked against the system's parameters so far (not against the other parts: several
    /// are the members of a `ParamSet`), then all are merged in. The one place every
    /// parameter's access goes through.
    fn add_param(
        &mut self,
        system: &str,
        parts: &[SystemAccess],
        param: String,
    ) -> Result<(), ScheduleError> {
        for part in parts {
            for (first, mine) in &self.params {
                if let Some(on) = mine.conflict_on(part) {
                    return Err(ScheduleError::ConflictingParams {
                        system: system.to_owned(),
                        first: first.clone(),
                        second: param,
                        on,
                    });
                }
            }
        }
        for part in parts {
            self.extend(part);
            let own = SystemAccess { params: Vec::new(), ..part.clone() };
            self.params.push((param.clone(), own));
        }
        Ok(())
    }

    /// What two parameters' accesses (this one and `other`) would alias: a component, a
    /// resource, or the world; `None` if they can be used side by side.
    fn conflict_on(&self, other: &SystemAccess) -> Option<&'static str> {
        for (access, _) in &other.queries {
            for (mine, _) in &self.queries {
                if let Some(key) = access.conflict(mine) {
                    return Some(key.name);
                }
            }
        }
        if (self.world_read && other.writes_anything())
            || (other.world_read && self.writes_anything())
        {
            return Some("the world");
        }
        self.resource_writes
            .first_common(&other.resource_writes)
            .or_else(|| self.resource_writes.first_common(&other.resource_reads))
            .or_else(|| self.resource_reads.first_common(&other.resource_writes))
            .map(|key| key.name)
    }

    /// Whether the system writes anything at all.
    pub fn writes_anything(&self) -> bool {
        self.queries.iter().any(|(a, _)| !a.writes.is_empty()) || !self.resource_writes.is_empty()
    }

    /// Merges `other` (a run condition's access) into this one.
    pub fn extend(&mut self, other: &SystemAccess) {
        self.queries.extend(other.queries.iter().cloned());
        for key in other.resource_reads.iter() {
            self.resource_reads.insert(*key);
        }
        for key in other.resource_writes.iter() {
            self.resource_writes.insert(*key);
        }
        self.world_read |= other.world_read;
        self.exclusive |= other.exclusive;
        self.reserves_entities |= other.reserves_entities;
    }

    /// Whether the system can reserve entity ids: through `Commands`, or through the `&World`
    /// it is given (`World::reserve_entity` takes `&self`).
    pub fn may_reserve_entities(&self) -> bool {
        self.reserves_entities || self.world_read
    }

    /// Whether the two systems may not run at the same time.
    pub fn conflicts_with(&self, other: &SystemAccess) -> bool {
        if self.exclusive
            || other.exclusive
            || (self.may_reserve_entities() && other.may_reserve_entities())
        {
            return true;
        }
        if (self.world_read && other.writes_anything())
            || (other.world_read && self.writes_anything())
        {
            return true;
        }
        if self.resource_writes.first_common(&other.resource_writes).is_some()
            || self.resource_writes.first_common(&other.resource_reads).is_some()
            || self.resource_reads.first_common(&other.resource_writes).is_some()
        {
            return true;
        }
        self.queries.iter().any(|(a, _)| other.queries.iter().any(|(b, _)| a.conflict(b).is_some()))
    }
}
