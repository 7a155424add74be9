//! The `many_archetypes` workload's worlds, shared by the criterion bench (`benches/query.rs`,
//! which iterates them) and `world_report` (which times their build and counts their memory):
//! [`COMBOS`] combinations of the 16 marker components `M0`..`M15`, [`PER_COMBO`] entities each.
//! Every entity is spawned with [`Data`] and gets its markers one `insert` at a time, the way a
//! game's entities gain tags, so each library also makes the archetypes on the way there.

/// Marker combinations, each its own archetype.
pub const COMBOS: u64 = 20_000;
/// Entities per combination.
pub const PER_COMBO: usize = 5;

/// The component every entity has and the iteration reads and writes.
#[derive(Clone, Copy, Debug, bevy_ecs::component::Component, shipyard::Component)]
pub struct Data(pub u64);

/// The iteration's work for one entity.
#[inline(always)]
pub fn bump(d: &mut Data) {
    d.0 = d.0.wrapping_add(1);
}

macro_rules! markers {
    ($($m:ident),*) => {
        $(
            /// A marker component: no data.
            #[derive(Clone, Copy, Debug, bevy_ecs::component::Component, shipyard::Component)]
            pub struct $m;
        )*
    };
}
markers!(M0, M1, M2, M3, M4, M5, M6, M7, M8, M9, M10, M11, M12, M13, M14, M15);

/// Runs `$body` with `$m` bound to the marker number `$bit`.
macro_rules! with_marker {
    ($bit:expr, |$m:ident| $body:expr) => {
        match $bit {
            0 => with_marker!(@ M0, $m, $body),
            1 => with_marker!(@ M1, $m, $body),
            2 => with_marker!(@ M2, $m, $body),
            3 => with_marker!(@ M3, $m, $body),
            4 => with_marker!(@ M4, $m, $body),
            5 => with_marker!(@ M5, $m, $body),
            6 => with_marker!(@ M6, $m, $body),
            7 => with_marker!(@ M7, $m, $body),
            8 => with_marker!(@ M8, $m, $body),
            9 => with_marker!(@ M9, $m, $body),
            10 => with_marker!(@ M10, $m, $body),
            11 => with_marker!(@ M11, $m, $body),
            12 => with_marker!(@ M12, $m, $body),
            13 => with_marker!(@ M13, $m, $body),
            14 => with_marker!(@ M14, $m, $body),
            15 => with_marker!(@ M15, $m, $body),
            _ => unreachable!(),
        }
    };
    (@ $t:ident, $m:ident, $body:expr) => {{
        let $m = $t;
        $body
    }};
}

/// The marker bits of the `k`-th combination (`k` in `1..=COMBOS`): a bijection of the 16-bit
/// numbers, so all combinations differ.
pub fn combo(k: u64) -> u64 {
    (k * 40503) & 0xFFFF
}

/// Makes every entity with `$spawn` (`$k` its combination's number) and gives it each of its
/// markers with `$insert` (`$e` the entity, `$m` the marker).
macro_rules! build {
    (|$k:ident| $spawn:expr, |$e:ident, $m:ident| $insert:expr) => {
        for $k in 1..=COMBOS {
            let c = combo($k);
            for _ in 0..PER_COMBO {
                let $e = $spawn;
                for bit in 0..16 {
                    if c >> bit & 1 == 1 {
                        with_marker!(bit, |$m| $insert);
                    }
                }
            }
        }
    };
}

/// folio's world.
pub fn folio_world() -> folio_archetype::World {
    let mut w = folio_archetype::World::new();
    build!(|k| w.spawn((Data(k),)), |e, m| w.insert(e, (m,)).unwrap());
    w
}

/// bevy's world.
pub fn bevy_world() -> bevy_ecs::world::World {
    let mut w = bevy_ecs::world::World::new();
    build!(|k| w.spawn((Data(k),)).id(), |e, m| {
        w.entity_mut(e).insert(m);
    });
    w
}

/// hecs's world.
pub fn hecs_world() -> hecs::World {
    let mut w = hecs::World::new();
    build!(|k| w.spawn((Data(k),)), |e, m| w.insert_one(e, m).unwrap());
    w
}

/// shipyard's world.
pub fn shipyard_world() -> shipyard::World {
    let mut w = shipyard::World::new();
    build!(|k| w.add_entity((Data(k),)), |e, m| w.add_component(e, (m,)));
    w
}
