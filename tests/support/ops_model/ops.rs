//! The operations of a sequence and their decoding from bytes (a seeded generator's or a
//! fuzzer's), one decoder for both.

/// Where bytes for [`decode_op`] come from.
pub(crate) trait Source {
    /// The next byte.
    fn byte(&mut self) -> u8;

    /// The next two bytes, little-endian.
    fn u16(&mut self) -> u16 {
        u16::from(self.byte()) | (u16::from(self.byte()) << 8)
    }
}

/// A fuzzer's input: its bytes, then zeros.
pub(crate) struct ByteSource<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> ByteSource<'a> {
    /// Reads `data`.
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    /// Whether every byte was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
}

impl Source for ByteSource<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
}

/// A seeded generator (splitmix64).
pub(crate) struct Rng(u64);

impl Rng {
    /// The generator for `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

impl Source for Rng {
    fn byte(&mut self) -> u8 {
        (self.next_u64() >> 56) as u8
    }
}

/// An entity chosen when the operation runs: below 192 a live entity (by position in entity
/// order), up to 254 any entity ever made in the sequence (live or dead), 255 one never made.
pub(crate) type Target = u8;

/// One operation of a sequence.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// `World::spawn` of a bundle shape.
    Spawn {
        /// Bundle shape.
        shape: u8,
    },
    /// `World::spawn_batch` of `n` bundles of one shape.
    SpawnBatch {
        /// Bundle shape.
        shape: u8,
        /// How many.
        n: u8,
    },
    /// `World::despawn`.
    Despawn {
        /// The entity.
        target: Target,
    },
    /// `World::insert` (components the entity has are replaced).
    Insert {
        /// The entity.
        target: Target,
        /// Bundle shape.
        shape: u8,
    },
    /// `World::try_remove`.
    Remove {
        /// The entity.
        target: Target,
        /// Bundle shape; from 128 on, one component the entity has (when it has any), so
        /// that more removes succeed.
        shape: u8,
    },
    /// `World::get_mut`, writing `data`.
    GetMut {
        /// The entity.
        target: Target,
        /// Component kind.
        kind: u8,
        /// What to write.
        data: u16,
    },
    /// A query state's `iter_mut` over `(Entity, &mut A, Option<&mut SAl>)`, writing to the
    /// entities whose index is `sel` modulo 3 and only reading the others.
    QueryWrite {
        /// Which entities to write.
        sel: u8,
        /// What to write.
        data: u16,
    },
    /// A query state's `par_iter_mut` over `&mut SBig` with `S`.
    ParQueryWrite {
        /// What to xor in.
        data: u16,
    },
    /// A schedule run: systems mutating components in parallel, then these commands.
    RunSchedule {
        /// The commands one system issues.
        cmds: Vec<Cmd>,
    },
    /// `World::reserve_entity` then `World::flush`.
    Reserve,
    /// `World::clear`.
    Clear,
    /// `World::try_spawn` of a bundle that repeats a component: an error.
    SpawnDup,
    /// `World::insert` of a bundle that repeats a component: an error.
    InsertDup {
        /// The entity.
        target: Target,
    },
    /// `World::try_remove` of a bundle that repeats a component: an error.
    RemoveDup {
        /// The entity.
        target: Target,
    },
    /// `World::check_change_ticks`.
    CheckTicks,
    /// `World::set_parent`: checked, an error (nothing changed) for a dead entity, a self
    /// relation or a cycle; a reparent when the child has a parent.
    SetParent {
        /// The child.
        child: Target,
        /// The parent.
        parent: Target,
    },
    /// `World::insert` of `ChildOf(parent)`: a bad one (self, dead parent, cycle) is undone,
    /// leaving the child without a parent.
    InsertChildOf {
        /// The child.
        child: Target,
        /// The parent.
        parent: Target,
    },
    /// `World::remove_parent`.
    RemoveParent {
        /// The child.
        child: Target,
    },
    /// `World::despawn_recursive`.
    DespawnRecursive {
        /// The root of the subtree.
        target: Target,
    },
    /// `World::spawn_batch` of 100 to 800 bundles (enough to move small columns from the heap
    /// into their reservations), each value checked, then `World::despawn` of all but every
    /// 50th, odd positions first (swap-removes from the middle), then even ones backwards.
    Churn {
        /// Bundle shape.
        shape: u8,
        /// 100 plus this modulo 701 bundles.
        n: u16,
    },
}

/// A command issued through [`Commands`] by a system during [`Op::RunSchedule`].
#[derive(Clone, Debug)]
pub(crate) enum Cmd {
    /// `Commands::spawn`.
    Spawn {
        /// Bundle shape.
        shape: u8,
    },
    /// `Commands::despawn`.
    Despawn {
        /// The entity.
        target: CmdTarget,
    },
    /// `Commands::insert`.
    Insert {
        /// The entity.
        target: CmdTarget,
        /// Bundle shape.
        shape: u8,
    },
    /// `Commands::remove`.
    Remove {
        /// The entity.
        target: CmdTarget,
        /// Bundle shape.
        shape: u8,
    },
    /// `Commands::insert` of `ChildOf(parent)`.
    ChildOf {
        /// The child.
        target: CmdTarget,
        /// The parent, chosen when the commands are planned.
        parent: Target,
    },
}

/// The entity a command is about.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CmdTarget {
    /// One chosen when the schedule runs, as by [`Target`].
    World(Target),
    /// The one spawned by an earlier `Cmd::Spawn` of the same run (index among them, modulo
    /// their number; a world target when there is none).
    Spawned(u8),
}

/// Most commands in one schedule run.
pub(crate) const MAX_CMDS: u8 = 6;
/// Most bundles in one `spawn_batch`.
pub(crate) const MAX_BATCH: u8 = 8;

/// Decodes one operation.
pub(crate) fn decode_op(src: &mut impl Source) -> Op {
    match src.byte() {
        0..=39 => Op::Spawn { shape: src.byte() },
        40..=47 => Op::SpawnBatch { shape: src.byte(), n: src.byte() % (MAX_BATCH + 1) },
        48..=69 | 238..=240 => Op::Despawn { target: src.byte() },
        226..=230 => Op::SetParent { child: src.byte(), parent: src.byte() },
        231..=233 => Op::InsertChildOf { child: src.byte(), parent: src.byte() },
        234..=235 => Op::RemoveParent { child: src.byte() },
        236..=237 => Op::DespawnRecursive { target: src.byte() },
        70..=111 | 241..=255 => Op::Insert { target: src.byte(), shape: src.byte() },
        112..=141 => Op::Remove { target: src.byte(), shape: src.byte() },
        142..=163 => Op::GetMut { target: src.byte(), kind: src.byte(), data: src.u16() },
        164..=177 => Op::QueryWrite { sel: src.byte(), data: src.u16() },
        178..=185 => Op::ParQueryWrite { data: src.u16() },
        186..=203 => {
            let n = src.byte() % (MAX_CMDS + 1);
            Op::RunSchedule { cmds: (0..n).map(|_| decode_cmd(src)).collect() }
        }
        204..=209 => Op::Reserve,
        210..=211 => Op::Clear,
        212..=215 => Op::SpawnDup,
        216..=219 => Op::InsertDup { target: src.byte() },
        220..=223 => Op::RemoveDup { target: src.byte() },
        224 => Op::CheckTicks,
        225 => Op::Churn { shape: src.byte(), n: src.u16() },
    }
}

pub(crate) fn decode_cmd(src: &mut impl Source) -> Cmd {
    let kind = src.byte();
    let spawned = kind & 1 == 1;
    let target = |b| if spawned { CmdTarget::Spawned(b) } else { CmdTarget::World(b) };
    match (kind >> 1) % 5 {
        0 => Cmd::Spawn { shape: src.byte() },
        1 => Cmd::Despawn { target: target(src.byte()) },
        2 => {
            let target = target(src.byte());
            Cmd::Insert { target, shape: src.byte() }
        }
        3 => {
            let target = target(src.byte());
            Cmd::ChildOf { target, parent: src.byte() }
        }
        _ => {
            let target = target(src.byte());
            Cmd::Remove { target, shape: src.byte() }
        }
    }
}

/// The operations of a seeded sequence: 50 to 170 of them.
pub(crate) fn seeded_ops(seed: u64) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let len = 50 + rng.below(121) as usize;
    (0..len).map(|_| decode_op(&mut rng)).collect()
}

/// Most operations decoded from one fuzz input.
pub(crate) const MAX_FUZZ_OPS: usize = 1000;

/// The operations encoded in a fuzz input.
pub(crate) fn ops_from_bytes(data: &[u8]) -> Vec<Op> {
    let mut src = ByteSource::new(data);
    let mut ops = Vec::new();
    while !src.is_empty() && ops.len() < MAX_FUZZ_OPS {
        ops.push(decode_op(&mut src));
    }
    ops
}
