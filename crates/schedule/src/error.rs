//! What can go wrong building or running a schedule.

use std::fmt;

/// A schedule error.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScheduleError {
    /// Two parameters of one system would alias (`Query<&mut A>` beside `Query<&A>`).
    ConflictingParams {
        /// The system.
        system: String,
        /// One parameter.
        first: String,
        /// The other.
        second: String,
        /// The component or resource both touch (its type name), or "the world".
        on: &'static str,
    },
    /// The ordering constraints form a cycle through these systems.
    Cycle(Vec<String>),
    /// Sets nested in one another in a cycle ([`SetConfig::in_set`](crate::SetConfig::in_set)):
    /// these sets, shown by their `Debug`, the first repeated at the end.
    SetCycle(Vec<String>),
    /// A system panicked; the other running systems finished first and the world is
    /// consistent.
    SystemPanicked {
        /// The system.
        system: String,
        /// The panic message, if it was a string.
        message: String,
    },
    /// A system returned `Err` (systems may return `Result<(), E>`). The run went on as after
    /// an `Ok`: the other systems ran (as their run conditions allowed) and every command
    /// buffer, the failing system's too, was applied.
    SystemFailed {
        /// The first system that failed, in the schedule's order.
        system: String,
        /// Its error, as its `Display` wrote it.
        error: String,
        /// How many other systems failed in the same run.
        others: usize,
    },
    /// An ordering constraint names a system or set that is not in the schedule (a typo, or a
    /// system not added).
    UnknownLabel(String),
    /// A run condition writes, uses `Commands`, or needs the world to itself; conditions must
    /// only read.
    ConditionNotReadOnly {
        /// The condition.
        condition: String,
    },
    /// A system run on its own ([`System::run`](crate::System::run),
    /// [`RunSystemOnce::run_system_once`](crate::RunSystemOnce::run_system_once),
    /// [`RunSystemOnce::run_system`](crate::RunSystemOnce::run_system)) did not run: one of its
    /// parameters cannot be built now (a [`Single`](crate::Single) whose query matches no
    /// entity or several). In a [`Schedule`](crate::Schedule) such a system is skipped for the
    /// run instead, without an error.
    InvalidParam {
        /// The system.
        system: String,
        /// The parameter.
        param: String,
        /// Why it cannot be built.
        reason: &'static str,
    },
    /// [`RunSystemOnce::run_system`](crate::RunSystemOnce::run_system) or
    /// [`RunSystemOnce::unregister_system`](crate::RunSystemOnce::unregister_system) was given an
    /// id that names no registered system: never registered in this world, or unregistered
    /// since.
    UnknownSystem {
        /// The id, as its `Debug` writes it.
        id: String,
    },
    /// A registered system was asked to run while it is running (it runs itself, directly or
    /// through another registered system).
    SystemAlreadyRunning {
        /// The system.
        system: String,
    },
    /// A query parameter could not be built.
    Query {
        /// The system.
        system: String,
        /// Why.
        error: folio_query::QueryError,
    },
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ConflictingParams { system, first, second, on } => write!(
                f,
                "system `{system}`: parameters `{first}` and `{second}` conflict on `{}` \
                 (one writes what the other reads or writes; add a Without filter to make \
                 two queries disjoint, merge them into one, or take them one at a time \
                 through a ParamSet)",
                crate::param::short_type_name(on)
            ),
            Self::Cycle(systems) => {
                write!(f, "the ordering constraints form a cycle: {}", systems.join(" -> "))
            }
            Self::SetCycle(sets) => {
                write!(f, "the sets are nested in a cycle: {}", sets.join(" in "))
            }
            Self::SystemPanicked { system, message } => {
                write!(f, "system `{system}` panicked: {message}")
            }
            Self::SystemFailed { system, error, others: 0 } => {
                write!(f, "system `{system}` failed: {error}")
            }
            Self::SystemFailed { system, error, others } => write!(
                f,
                "system `{system}` failed: {error} (and {others} more system(s) in the same run)"
            ),
            Self::InvalidParam { system, param, reason } => {
                write!(f, "system `{system}` did not run: its parameter `{param}` {reason}")
            }
            Self::UnknownSystem { id } => write!(
                f,
                "no registered system has id {id} (it was never registered in this world, or \
                 was unregistered since)"
            ),
            Self::SystemAlreadyRunning { system } => write!(
                f,
                "registered system `{system}` was asked to run while it is running (it runs \
                 itself, directly or through another registered system)"
            ),
            Self::Query { system, error } => write!(f, "system `{system}`: {error}"),
            Self::UnknownLabel(what) => {
                write!(f, "an ordering constraint names {what}, which is not in the schedule")
            }
            Self::ConditionNotReadOnly { condition } => write!(
                f,
                "run condition `{condition}` must only read (no ResMut, no &mut queries, no \
                 Commands, no &mut World)"
            ),
        }
    }
}

impl std::error::Error for ScheduleError {}
