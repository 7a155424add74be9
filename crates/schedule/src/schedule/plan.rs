//! Building a [`Schedule`]'s plan: the DAG of explicit and conflict edges, its cycles, the
//! automatic sync points, the one topological order, and the segments it is cut into.

use ahash::{AHashMap, AHashSet};

use super::{Plan, Schedule, Segment, SegmentRuns};
use crate::config::{ErasedSet, Label};
use crate::error::ScheduleError;

impl Schedule {
    #[allow(clippy::needless_range_loop)] // `edges` is written at other indices in the loop
    pub(super) fn build_plan(&self) -> Result<Plan, ScheduleError> {
        let n = self.nodes.len();
        let sets = SetGraph::new(self)?;
        // Per node, every set it is in: its own and, transitively, their parents.
        let memberships: Vec<Vec<usize>> =
            (0..n).map(|i| sets.memberships(&self.node(i).sets)).collect();
        let matches = |label: &Label| -> Vec<usize> {
            match label {
                Label::System(id, _) => (0..n).filter(|&i| self.node(i).label == *id).collect(),
                Label::Set(set) => match sets.id(set) {
                    Some(s) => {
                        (0..n).filter(|&i| memberships[i].binary_search(&s).is_ok()).collect()
                    }
                    None => Vec::new(),
                },
            }
        };
        // A label that names nothing is a typo, not a constraint to drop silently.
        let mut labels: Vec<&Label> = self
            .sets
            .iter()
            .flat_map(|(_, c)| c.before.iter().chain(&c.after))
            .map(|d| &d.label)
            .collect();
        for i in 0..n {
            let node = self.node(i);
            labels.extend(node.before.iter().chain(&node.after).map(|d| &d.label));
        }
        for (set, _) in &self.sets {
            if matches(&Label::Set(set.clone())).is_empty() {
                return Err(ScheduleError::UnknownLabel(format!(
                    "set `{set:?}` (configured, but no system is in it)"
                )));
            }
        }
        for label in labels {
            if matches(label).is_empty() {
                let what = match label {
                    Label::System(_, name) => {
                        format!("system `{}`", crate::param::short_type_name(name))
                    }
                    Label::Set(set) => format!("set `{set:?}`"),
                };
                return Err(ScheduleError::UnknownLabel(what));
            }
        }
        // Explicit edges, from the systems' and their sets' constraints; and the same edges
        // with whether each constraint asks for an automatic sync point.
        let mut edges = vec![Vec::new(); n];
        let mut sync_edges: Vec<(usize, usize, bool)> = Vec::new();
        for i in 0..n {
            let node = self.node(i);
            // Configured sets come first in `SetGraph`'s ids, at their index in `self.sets`.
            let set_configs =
                memberships[i].iter().filter_map(|&s| self.sets.get(s)).map(|(_, c)| c);
            let befores = node.before.iter().chain(set_configs.clone().flat_map(|c| &c.before));
            let afters = node.after.iter().chain(set_configs.flat_map(|c| &c.after));
            // A label that matches the node itself (`x.after(x)`, a set ordered after itself,
            // a system in two sets ordered one before the other) is a self-loop: a cycle.
            for dependency in befores {
                for j in matches(&dependency.label) {
                    edges[i].push(j);
                    sync_edges.push((i, j, dependency.auto_sync));
                }
            }
            for dependency in afters {
                for j in matches(&dependency.label) {
                    edges[j].push(i);
                    sync_edges.push((j, i, dependency.auto_sync));
                }
            }
            if let Some((j, auto_sync)) = node.after_node {
                edges[j].push(i);
                sync_edges.push((j, i, auto_sync));
            }
        }
        for list in &mut edges {
            list.sort_unstable();
            list.dedup();
        }
        if let Some(cycle) = find_cycle(&edges) {
            let names = cycle.iter().map(|&i| self.node(i).system.name().to_owned()).collect();
            return Err(ScheduleError::Cycle(names));
        }
        // Reachability over the explicit edges, then conflict edges in insertion order where
        // nothing orders the pair yet (an added edge never closes a cycle: its head does not
        // reach its tail).
        let mut reach = Reach::new(n);
        for (from, list) in edges.iter().enumerate() {
            for &to in list {
                reach.add_edge(from, to);
            }
        }
        for i in 0..n {
            for j in i + 1..n {
                if reach.reaches(i, j) || reach.reaches(j, i) {
                    continue;
                }
                if self.node(i).access.conflicts_with(&self.node(j).access) {
                    edges[i].push(j);
                    reach.add_edge(i, j);
                }
            }
        }
        // Automatic sync points: nodes `n..`, added after the conflict edges, which are so the
        // same with the points or without. A shared point can order two systems nothing
        // ordered before (a predecessor of the point before another edge's successor), never
        // against an edge.
        if self.auto_sync {
            for (before, after) in self.auto_sync_points(&edges, &sync_edges, &reach) {
                let point = edges.len();
                for i in before {
                    edges[i].push(point);
                }
                edges.push(after);
            }
        }
        // An automatic sync point has the largest index, so it is taken when no system is
        // ready: as late as it can be, which leaves the segment before it as large as it can be.
        let full_order = topological_order(&edges);
        let order: Vec<usize> = full_order.iter().copied().filter(|&i| i < n).collect();
        let mut tick_offset = vec![0; n];
        let mut ticks = 0u32;
        for &i in &order {
            tick_offset[i] = ticks;
            ticks = ticks.wrapping_add(self.node(i).ticks_taken());
        }
        let mut segments = Vec::new();
        let mut current: Vec<usize> = Vec::new();
        let flush = |current: &mut Vec<usize>, segments: &mut Vec<Segment>| {
            if current.is_empty() {
                return;
            }
            let nodes = std::mem::take(current);
            let local: AHashMap<usize, usize> =
                nodes.iter().enumerate().map(|(k, &i)| (i, k)).collect();
            let mut predecessors = vec![0; nodes.len()];
            let mut successors = vec![Vec::new(); nodes.len()];
            for (k, &i) in nodes.iter().enumerate() {
                for &j in &edges[i] {
                    if let Some(&kj) = local.get(&j) {
                        successors[k].push(kj);
                        predecessors[kj] += 1;
                    }
                }
            }
            segments.push(Segment::Parallel {
                nodes,
                predecessors,
                successors,
                runs: SegmentRuns::default(),
            });
        };
        // The number of nodes of `order` placed so far.
        let mut placed = 0;
        for &i in &full_order {
            if i >= n {
                flush(&mut current, &mut segments);
                segments.push(Segment::Sync { upto: placed, node: None });
                continue;
            }
            if self.node(i).sync_point {
                flush(&mut current, &mut segments);
                segments.push(Segment::Sync { upto: placed, node: Some(i) });
            } else if self.node(i).access.exclusive {
                flush(&mut current, &mut segments);
                segments.push(Segment::Exclusive(i));
            } else {
                current.push(i);
            }
            placed += 1;
        }
        flush(&mut current, &mut segments);
        let fallible = order.iter().copied().filter(|&i| self.node(i).system.can_fail()).collect();
        let node_sets = memberships
            .into_iter()
            .map(|mut m| {
                m.retain(|&s| s < self.sets.len());
                m
            })
            .collect();
        Ok(Plan { order, tick_offset, segments, fallible, node_sets })
    }

    /// The automatic sync points of the DAG `edges` (explicit and conflict edges, over the
    /// nodes), as each one's predecessors and successors, ascending. `sync_edges` are the
    /// explicit edges, each with whether its constraint asks for a point (`false` for the
    /// `_ignore_deferred` forms).
    ///
    /// A node *carries* deferred work when it has some
    /// ([`System::has_deferred`](crate::System::has_deferred)) or an edge that ignores deferred
    /// work leads to it from a node that carries some: the work is still to be applied for the
    /// nodes after it. An explicit edge `a -> b` from a node that carries needs a point when a
    /// constraint of it asks for one and no sync point already lies between them in every
    /// order: `b` is not one, and no [`ApplyDeferred`](crate::ApplyDeferred) is reached from `a`
    /// and reaches `b` (`reach`: an explicit sync point conflicts with every system, so each is
    /// ordered with it). So a system sees the commands of every system before it on a path of
    /// explicit edges, unless every edge of the path ignores them.
    ///
    /// As few points as the DAG allows: each node gets a *distance*, the most points needed on
    /// a path to it (an edge that needs one counts one); the edges into nodes of distance `d`
    /// share the point `d`. Distances never fall along an edge, and a point's predecessors are
    /// below its distance while its successors are at it, so the points add no cycle.
    fn auto_sync_points(
        &self,
        edges: &[Vec<usize>],
        sync_edges: &[(usize, usize, bool)],
        reach: &Reach,
    ) -> Vec<(Vec<usize>, Vec<usize>)> {
        let n = edges.len();
        let sync_point = |i: usize| self.node(i).sync_point;
        let explicit: Vec<usize> = (0..n).filter(|&i| sync_point(i)).collect();
        // Per node, its explicit successors, each with whether a constraint asks for a point.
        let mut explicit_out: Vec<Vec<(usize, bool)>> = vec![Vec::new(); n];
        let mut sorted = sync_edges.to_vec();
        // `true` after `false`: the last of a pair's entries says whether any asks.
        sorted.sort_unstable();
        for (a, b, asks) in sorted {
            match explicit_out[a].last_mut() {
                Some(last) if last.0 == b => last.1 = asks,
                _ => explicit_out[a].push((b, asks)),
            }
        }
        let order = topological_order(edges);
        let mut pending = vec![false; n];
        let mut needed: Vec<(usize, usize)> = Vec::new();
        for &a in &order {
            if sync_point(a) || !(pending[a] || self.node(a).system.has_deferred()) {
                continue;
            }
            for &(b, asks) in &explicit_out[a] {
                if sync_point(b)
                    || explicit.iter().any(|&s| reach.reaches(a, s) && reach.reaches(s, b))
                {
                    continue;
                }
                if asks {
                    needed.push((a, b));
                } else {
                    pending[b] = true;
                }
            }
        }
        if needed.is_empty() {
            return Vec::new();
        }
        let needs: AHashSet<(usize, usize)> = needed.iter().copied().collect();
        let mut distance = vec![0usize; n];
        for &a in &order {
            for &b in &edges[a] {
                let d = distance[a] + usize::from(needs.contains(&(a, b)));
                distance[b] = distance[b].max(d);
            }
        }
        // One point per distance some needing edge leads to, in ascending distance.
        let mut distances: Vec<usize> = needed.iter().map(|&(_, b)| distance[b]).collect();
        distances.sort_unstable();
        distances.dedup();
        let mut points = vec![(Vec::new(), Vec::new()); distances.len()];
        for &(a, b) in &needed {
            let k = distances.binary_search(&distance[b]).expect("listed above");
            points[k].0.push(a);
            points[k].1.push(b);
        }
        for (before, after) in &mut points {
            before.sort_unstable();
            before.dedup();
            after.sort_unstable();
            after.dedup();
        }
        points
    }
}

/// Every set the schedule mentions, numbered: the configured sets first, at their index in the
/// schedule's `sets`, then the others as they are met (in systems' `in_set`s and sets'
/// parents). Nesting is checked for cycles when it is built.
struct SetGraph {
    ids: AHashMap<ErasedSet, usize>,
    /// Per set, the sets it is in, itself included, transitively; ascending.
    ancestors: Vec<Vec<usize>>,
}

impl SetGraph {
    fn new(schedule: &Schedule) -> Result<Self, ScheduleError> {
        let mut ids: AHashMap<ErasedSet, usize> = AHashMap::default();
        let mut names: Vec<ErasedSet> = Vec::new();
        let mut intern = |set: &ErasedSet| -> usize {
            *ids.entry(set.clone()).or_insert_with(|| {
                names.push(set.clone());
                names.len() - 1
            })
        };
        for (set, _) in &schedule.sets {
            intern(set);
        }
        // Child -> parent edges.
        let mut parents: Vec<Vec<usize>> = Vec::new();
        for (set, config) in &schedule.sets {
            let child = intern(set);
            let list: Vec<usize> = config.parents.iter().map(&mut intern).collect();
            parents.resize(parents.len().max(child + 1), Vec::new());
            parents[child].extend(list);
        }
        for i in 0..schedule.nodes.len() {
            for set in &schedule.node(i).sets {
                intern(set);
            }
        }
        parents.resize(names.len(), Vec::new());
        for list in &mut parents {
            list.sort_unstable();
            list.dedup();
        }
        if let Some(cycle) = find_cycle(&parents) {
            return Err(ScheduleError::SetCycle(
                cycle.iter().map(|&s| format!("{:?}", names[s])).collect(),
            ));
        }
        let ancestors = (0..names.len())
            .map(|s| {
                let mut seen = vec![s];
                let mut next = 0;
                while let Some(&at) = seen.get(next) {
                    next += 1;
                    for &p in &parents[at] {
                        if !seen.contains(&p) {
                            seen.push(p);
                        }
                    }
                }
                seen.sort_unstable();
                seen
            })
            .collect();
        Ok(Self { ids, ancestors })
    }

    fn id(&self, set: &ErasedSet) -> Option<usize> {
        self.ids.get(set).copied()
    }

    /// The sets a system in `sets` is in: theirs and their ancestors, ascending.
    fn memberships(&self, sets: &[ErasedSet]) -> Vec<usize> {
        let mut all: Vec<usize> =
            sets.iter().flat_map(|s| &self.ancestors[self.ids[s]]).copied().collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// Reachability as a bit matrix: `rows[a]` has bit `b` when `a` reaches `b`.
struct Reach {
    words: usize,
    rows: Vec<u64>,
}

impl Reach {
    fn new(n: usize) -> Self {
        let words = n.div_ceil(64).max(1);
        Self { words, rows: vec![0; words * n] }
    }

    fn reaches(&self, a: usize, b: usize) -> bool {
        self.rows[a * self.words + b / 64] & (1 << (b % 64)) != 0
    }

    /// Adds `a -> b`: everything that reaches `a` (and `a`) now reaches `b` and all `b` reaches.
    fn add_edge(&mut self, a: usize, b: usize) {
        let n = self.rows.len() / self.words;
        let mut from_b: Vec<u64> = self.rows[b * self.words..(b + 1) * self.words].to_vec();
        from_b[b / 64] |= 1 << (b % 64);
        for x in 0..n {
            if x == a || self.reaches(x, a) {
                let row = &mut self.rows[x * self.words..(x + 1) * self.words];
                for (w, f) in row.iter_mut().zip(&from_b) {
                    *w |= f;
                }
            }
        }
    }
}

/// A cycle in `edges`, as a list of nodes, if there is one.
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let n = edges.len();
    let mut mark = vec![Mark::New; n];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    let mut path: Vec<usize> = Vec::new();
    for start in 0..n {
        if mark[start] != Mark::New {
            continue;
        }
        stack.push((start, 0));
        mark[start] = Mark::Active;
        path.push(start);
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&to) = edges[node].get(*next) {
                *next += 1;
                match mark[to] {
                    Mark::New => {
                        mark[to] = Mark::Active;
                        stack.push((to, 0));
                        path.push(to);
                    }
                    Mark::Active => {
                        let from = path.iter().position(|&p| p == to).expect("on the path");
                        let mut cycle = path[from..].to_vec();
                        cycle.push(to);
                        return Some(cycle);
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
                path.pop();
            }
        }
    }
    None
}

/// Kahn's algorithm, always taking the ready node added first: one fixed order.
fn topological_order(edges: &[Vec<usize>]) -> Vec<usize> {
    let n = edges.len();
    let mut indegree = vec![0usize; n];
    for list in edges {
        for &to in list {
            indegree[to] += 1;
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &to in &edges[i] {
            indegree[to] -= 1;
            if indegree[to] == 0 {
                ready.insert(to);
            }
        }
    }
    debug_assert_eq!(order.len(), n, "cycles are rejected before");
    order
}
