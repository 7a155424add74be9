//! The model's component kinds (table and sparse-set stored, zero-sized, over-aligned, larger
//! than a page, with and without drop glue), the bundle shapes built from them, and the
//! thread-local tracker that records every value made and dropped.

use std::cell::RefCell;
use std::mem::size_of;

use folio::prelude::*;

// ----- drop tracking -----

/// Per-thread record of the values made by the running driver.
#[derive(Default)]
pub(crate) struct Tracker {
    /// By value id: 0 never made, 1 live, 2 dropped.
    pub(crate) states: Vec<u8>,
    /// Values with state 1.
    pub(crate) live: usize,
    /// Live values of the zero-sized components [`Z`] and [`SZ`] (made minus dropped).
    pub(crate) zst_live: [i64; 2],
    /// Double drops and other misuse, reported at the next check.
    pub(crate) errors: Vec<String>,
}

thread_local! {
    pub(crate) static TRACKER: RefCell<Tracker> = RefCell::new(Tracker::default());
}

pub(crate) fn track_new(id: u64) {
    TRACKER.with(|t| {
        let mut t = t.borrow_mut();
        let i = id as usize;
        if t.states.len() <= i {
            t.states.resize(i + 1, 0);
        }
        if t.states[i] != 0 {
            t.errors.push(format!("value {id} made twice"));
        }
        t.states[i] = 1;
        t.live += 1;
    });
}

pub(crate) fn track_drop(id: u64) {
    // Never panics: it runs inside the world's drops, maybe while unwinding.
    let _ = TRACKER.try_with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            match t.states.get(id as usize).copied() {
                Some(1) => {
                    t.states[id as usize] = 2;
                    t.live -= 1;
                }
                Some(2) => t.errors.push(format!("value {id} dropped twice")),
                _ => t.errors.push(format!("value {id} dropped but never made")),
            }
        }
    });
}

pub(crate) fn track_zst(which: usize, delta: i64) {
    let _ = TRACKER.try_with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            t.zst_live[which] += delta;
        }
    });
}

/// A value's identity, registered with the tracker while it lives.
pub(crate) struct Tracked(u64);

impl Tracked {
    fn new(id: u64) -> Self {
        track_new(id);
        Self(id)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        track_drop(self.0);
    }
}

// ----- components -----

/// Table-stored, tracked.
pub(crate) const K_A: usize = 0;
/// Table-stored, no drop glue.
pub(crate) const K_B: usize = 1;
/// Table-stored zero-sized type with a counted `Drop`.
pub(crate) const K_Z: usize = 2;
/// Table-stored, larger than a page.
pub(crate) const K_BIG: usize = 3;
/// Table-stored, 64-byte aligned.
pub(crate) const K_AL: usize = 4;
/// Sparse-set stored, tracked.
pub(crate) const K_S: usize = 5;
/// Sparse-set stored zero-sized type with a counted `Drop`.
pub(crate) const K_SZ: usize = 6;
/// Sparse-set stored, 64-byte aligned.
pub(crate) const K_SAL: usize = 7;
/// Sparse-set stored, larger than a page.
pub(crate) const K_SBIG: usize = 8;
/// Number of component kinds.
pub(crate) const KINDS: usize = 9;

/// Size of the big components' byte arrays: more than a 4 KiB page.
pub(crate) const BIG_BYTES: usize = 5000;

/// A component value as the model sees it: its identity and its (mutable) data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Val {
    /// Unique per value made (0 for zero-sized components).
    pub id: u64,
    /// Changed by `get_mut`, query writes and systems.
    pub data: u64,
}

/// A component kind of the model.
pub(crate) trait Kind: Component + Sized {
    /// Its index (`K_*`).
    const KIND: usize;
    /// A new value with identity `id`.
    fn make(id: u64) -> Self;
    /// Identity and data.
    fn val(&self) -> Val;
    /// Sets the data.
    fn set_data(&mut self, data: u64);
    /// Whether the value's bytes are as made (the big components check their array).
    fn intact(&self) -> bool {
        true
    }
}

/// The data a new value with identity `id` starts with.
pub(crate) fn initial_data(id: u64) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

macro_rules! tracked_kind {
    ($(#[$attr:meta])* $name:ident = $kind:ident $(, bytes $n:expr)?) => {
        $(#[$attr])*
        pub(crate) struct $name {
            id: u64,
            pub(crate) data: u64,
            $(bytes: [u8; $n],)?
            _tracked: Tracked,
        }

        impl Kind for $name {
            const KIND: usize = $kind;
            fn make(id: u64) -> Self {
                Self { id, data: initial_data(id), $(bytes: [id as u8; $n],)? _tracked: Tracked::new(id) }
            }
            fn val(&self) -> Val {
                Val { id: self.id, data: self.data }
            }
            fn set_data(&mut self, data: u64) {
                self.data = data;
            }
            fn intact(&self) -> bool {
                true $(&& (0..$n).step_by(499).chain([$n - 1]).all(|i| self.bytes[i] == self.id as u8))?
            }
        }
    };
}

tracked_kind!(
    /// Table-stored, tracked.
    A = K_A
);
tracked_kind!(
    /// Table-stored, larger than a page.
    Big = K_BIG, bytes BIG_BYTES
);
tracked_kind!(
    /// Table-stored, over-aligned.
    #[repr(align(64))]
    Al = K_AL
);
tracked_kind!(
    /// Sparse-set stored, tracked.
    S = K_S
);
tracked_kind!(
    /// Sparse-set stored, over-aligned.
    #[repr(align(64))]
    SAl = K_SAL
);
tracked_kind!(
    /// Sparse-set stored, larger than a page.
    SBig = K_SBIG, bytes BIG_BYTES
);

/// Table-stored, plain data (no drop glue).
pub(crate) struct B {
    id: u64,
    pub(crate) data: u64,
}

impl Kind for B {
    const KIND: usize = K_B;
    fn make(id: u64) -> Self {
        Self { id, data: initial_data(id) }
    }
    fn val(&self) -> Val {
        Val { id: self.id, data: self.data }
    }
    fn set_data(&mut self, data: u64) {
        self.data = data;
    }
}

macro_rules! zst_kind {
    ($(#[$attr:meta])* $name:ident = $kind:ident, $slot:expr) => {
        $(#[$attr])*
        pub(crate) struct $name;

        impl Kind for $name {
            const KIND: usize = $kind;
            fn make(_: u64) -> Self {
                track_zst($slot, 1);
                Self
            }
            fn val(&self) -> Val {
                Val { id: 0, data: 0 }
            }
            fn set_data(&mut self, _: u64) {}
        }

        impl Drop for $name {
            fn drop(&mut self) {
                track_zst($slot, -1);
            }
        }
    };
}

zst_kind!(
    /// Table-stored, zero-sized, counted drops.
    Z = K_Z, 0
);
zst_kind!(
    /// Sparse-set stored, zero-sized, counted drops.
    SZ = K_SZ, 1
);

/// `size_of` of each kind, for the `memory_stats` check.
pub(crate) const KIND_SIZE: [usize; KINDS] = [
    size_of::<A>(),
    size_of::<B>(),
    size_of::<Z>(),
    size_of::<Big>(),
    size_of::<Al>(),
    size_of::<S>(),
    size_of::<SZ>(),
    size_of::<SAl>(),
    size_of::<SBig>(),
];

/// Whether each kind's values carry a tracked identity.
pub(crate) const TRACKED: [bool; KINDS] = [true, false, false, true, true, true, false, true, true];

/// Code generic over one component kind, picked at run time by [`with_kind`].
pub(crate) trait KindFn {
    type Out;
    fn call<K: Kind>(self) -> Self::Out;
}

pub(crate) fn with_kind<F: KindFn>(kind: usize, f: F) -> F::Out {
    match kind {
        K_A => f.call::<A>(),
        K_B => f.call::<B>(),
        K_Z => f.call::<Z>(),
        K_BIG => f.call::<Big>(),
        K_AL => f.call::<Al>(),
        K_S => f.call::<S>(),
        K_SZ => f.call::<SZ>(),
        K_SAL => f.call::<SAl>(),
        K_SBIG => f.call::<SBig>(),
        _ => unreachable!("kind {kind}"),
    }
}

// ----- bundles -----

/// A bundle of model kinds.
pub(crate) trait Shape: Bundle + Sized {
    /// Its kinds, in order.
    const KINDS: &'static [usize];
    /// New values, with identities from `next_id`.
    fn make(next_id: &mut impl FnMut() -> u64) -> Self;
    /// The values, in order.
    fn vals(&self) -> Vec<(usize, Val)>;
}

macro_rules! shape_tuple {
    ($(($T:ident, $v:ident)),+) => {
        impl<$($T: Kind),+> Shape for ($($T,)+) {
            const KINDS: &'static [usize] = &[$($T::KIND),+];
            fn make(next_id: &mut impl FnMut() -> u64) -> Self {
                ($($T::make(next_id()),)+)
            }
            fn vals(&self) -> Vec<(usize, Val)> {
                let ($($v,)+) = self;
                vec![$(($T::KIND, $v.val())),+]
            }
        }
    };
}

shape_tuple!((T0, v0));
shape_tuple!((T0, v0), (T1, v1));
shape_tuple!((T0, v0), (T1, v1), (T2, v2));
shape_tuple!((T0, v0), (T1, v1), (T2, v2), (T3, v3));
shape_tuple!((T0, v0), (T1, v1), (T2, v2), (T3, v3), (T4, v4));
shape_tuple!(
    (T0, v0),
    (T1, v1),
    (T2, v2),
    (T3, v3),
    (T4, v4),
    (T5, v5),
    (T6, v6),
    (T7, v7),
    (T8, v8)
);

/// Code generic over one bundle shape, picked at run time by [`with_shape`].
pub(crate) trait ShapeFn {
    type Out;
    fn call<T: Shape>(self) -> Self::Out;
}

macro_rules! shapes {
    ($($i:literal => ($($K:ident),+);)+) => {
        /// Number of bundle shapes.
        pub(crate) const SHAPES: usize = [$($i),+].len();

        pub(crate) fn shape_kinds(shape: usize) -> &'static [usize] {
            match shape {
                $($i => <($($K,)+) as Shape>::KINDS,)+
                _ => unreachable!("shape {shape}"),
            }
        }

        pub(crate) fn with_shape<F: ShapeFn>(shape: usize, f: F) -> F::Out {
            match shape {
                $($i => f.call::<($($K,)+)>(),)+
                _ => unreachable!("shape {shape}"),
            }
        }
    };
}

shapes! {
    0 => (A);
    1 => (B);
    2 => (Z);
    3 => (Big);
    4 => (Al);
    5 => (S);
    6 => (SZ);
    7 => (SAl);
    8 => (SBig);
    9 => (A, B);
    10 => (B, Z, A);
    11 => (Big, Al);
    12 => (A, S);
    13 => (S, SZ);
    14 => (B, SAl, SBig);
    15 => (Al, Z, SZ);
    16 => (SAl, A);
    17 => (Z, Big, S, B);
    18 => (A, B, Z, Big, Al, S, SZ, SAl, SBig);
}
