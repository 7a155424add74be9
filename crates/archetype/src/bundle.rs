//! Bundles: tuples of components that are spawned, inserted or removed together (what a bundle
//! is, and which types are bundles, is on [`Bundle`]'s docs).
//!
//! # Safety model
//! `Bundle` is an `unsafe trait`: `component_ids`, `get_components` and `from_components` must
//! visit the same component types in the same order, so the erased pointers handed out always
//! point to values of the type whose id was reported at the same position.

use std::any::TypeId;
use std::mem::ManuallyDrop;

use smallvec::SmallVec;

use crate::component::{Component, ComponentId, Components};
use crate::error::ComponentError;

/// A list of component ids; most bundles and archetypes have few components.
pub type ComponentIds = SmallVec<[ComponentId; 8]>;

/// The most components one bundle holds: tuples of 1 to 16 components are bundles.
pub const MAX_BUNDLE_LEN: usize = 16;

/// A tuple of components moved into or out of the world together.
///
/// `Bundle` is implemented for `()` (an entity with no component yet) and for tuples of 1 to 16
/// components by `macro_rules!` (a lone component is
/// spawned as `(c,)`, as in hecs: a blanket impl for every component would overlap the tuple
/// impls). A bundle that repeats a component type is rejected by [`BundleInfo::new`] with
/// [`ComponentError::DuplicateComponent`].
///
/// # Safety
/// - `component_ids`, `type_ids`, `get_components`, `write_components`, `write_row` and
///   `from_components` visit the same components in the same order, at most
///   [`MAX_BUNDLE_LEN`] of them.
/// - `get_components` hands `f` one pointer to each component, readable for its size and valid
///   until `f` returns; `f` takes ownership of the values behind them (the bundle drops none).
pub unsafe trait Bundle: Send + Sync + 'static {
    /// Registers the components (table storage if new) and reports their ids in order.
    fn component_ids(components: &mut Components, ids: &mut impl FnMut(ComponentId));

    /// Reports the components' type ids in order.
    fn type_ids(ids: &mut impl FnMut(TypeId));

    /// Reports the components' type names in order, for the checks [`BundleInfo::new`] makes
    /// once per bundle type (no tuple among them). Reports nothing unless implemented.
    fn component_names(names: &mut impl FnMut(&'static str)) {
        let _ = names;
    }

    /// Moves the components out by handing `f` a pointer to each, in order.
    fn get_components<R>(self, f: impl FnOnce(&[*mut u8]) -> R) -> R;

    /// Moves the components out by writing the `i`-th one (in order) to `dst(i)`: a typed
    /// write, so spawning copies no more than the component itself.
    ///
    /// # Safety
    /// - For each `i < len`, `dst(i)` returns a pointer valid for writes of, and aligned for,
    ///   the `i`-th component's type, not overlapping the others; whatever it held is
    ///   overwritten without being dropped. `dst` must not unwind.
    unsafe fn write_components(self, dst: &mut impl FnMut(usize) -> *mut u8);

    /// Moves the components out into row `row` of the columns that start at `bases`: the
    /// `i`-th one (in order) is written to `bases[i]` advanced by `row` items of its type. What
    /// a batch spawn calls per row: the item sizes are the types', known here, so no size is
    /// looked up or multiplied per component, and the bases stay put for a whole batch.
    ///
    /// # Safety
    /// - For each `i < len`, `bases[i]` advanced by `row` items of the `i`-th component's type
    ///   is valid for a write of that type and aligned for it, and does not overlap the
    ///   others' slots; whatever it held is overwritten without being dropped.
    unsafe fn write_row(self, bases: &[*mut u8; MAX_BUNDLE_LEN], row: usize)
    where
        Self: Sized;

    /// Rebuilds the bundle from pointers to its components, in order.
    ///
    /// # Safety
    /// - Each call of `f` returns a pointer to a valid value of the next component's type,
    ///   whose ownership passes to the bundle.
    unsafe fn from_components(f: &mut impl FnMut() -> *mut u8) -> Self
    where
        Self: Sized;
}

/// What the world caches per bundle type: its ids in declared order and sorted.
#[derive(Clone, Debug)]
pub struct BundleInfo {
    /// Ids in the bundle's own order (the order `get_components` visits).
    ids: ComponentIds,
    /// The same ids, sorted: the bundle's part of an archetype signature.
    sorted: ComponentIds,
}

impl BundleInfo {
    /// The info of bundle `B`, registering its components; an error if it holds a tuple as a
    /// component (nothing is registered then) or repeats a type.
    pub fn new<B: Bundle>(components: &mut Components) -> Result<Self, ComponentError> {
        let mut tuple = None;
        B::component_names(&mut |name| {
            if tuple.is_none() && is_tuple(name) {
                tuple = Some(name);
            }
        });
        if let Some(name) = tuple {
            let bundle = Some(std::any::type_name::<B>());
            return Err(ComponentError::TupleComponent { name, bundle });
        }
        let mut ids = ComponentIds::new();
        B::component_ids(components, &mut |id| ids.push(id));
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(ComponentError::DuplicateComponent {
                name: components.info(pair[0]).name(),
                bundle: std::any::type_name::<B>(),
            });
        }
        Ok(Self { ids, sorted })
    }

    /// The ids in the bundle's own order.
    #[inline]
    pub fn ids(&self) -> &[ComponentId] {
        &self.ids
    }

    /// The ids, sorted.
    #[inline]
    pub fn sorted_ids(&self) -> &[ComponentId] {
        &self.sorted
    }
}

/// Whether a type name is a tuple's, `()` included: tuples are bundles, never components.
pub(crate) fn is_tuple(type_name: &str) -> bool {
    type_name.starts_with('(')
}

macro_rules! tuple_bundle {
    ($($name:ident),+) => {
        // SAFETY:
        // - every method visits `$name`s in the tuple's order.
        // - `get_components` wraps each value in `ManuallyDrop`, so ownership passes to `f`.
        unsafe impl<$($name: Component),+> Bundle for ($($name,)+) {
            fn component_ids(components: &mut Components, ids: &mut impl FnMut(ComponentId)) {
                $(ids(components.register::<$name>());)+
            }

            fn type_ids(ids: &mut impl FnMut(TypeId)) {
                $(ids(TypeId::of::<$name>());)+
            }

            fn component_names(names: &mut impl FnMut(&'static str)) {
                $(names(std::any::type_name::<$name>());)+
            }

            #[allow(non_snake_case)]
            #[inline(always)]
            fn get_components<R>(self, f: impl FnOnce(&[*mut u8]) -> R) -> R {
                let ($($name,)+) = self;
                $(let mut $name = ManuallyDrop::new($name);)+
                f(&[$((&mut *$name as *mut $name).cast::<u8>()),+])
            }

            #[allow(non_snake_case, unused_assignments)]
            #[inline(always)]
            unsafe fn write_components(self, dst: &mut impl FnMut(usize) -> *mut u8) {
                let ($($name,)+) = self;
                let mut i = 0;
                $(
                    // SAFETY: `dst(i)` is valid for writes of and aligned for the `i`-th
                    // component, which is `$name` (caller).
                    unsafe { dst(i).cast::<$name>().write($name) };
                    i += 1;
                )+
            }

            #[allow(non_snake_case, unused_assignments)]
            #[inline(always)]
            unsafe fn write_row(self, bases: &[*mut u8; MAX_BUNDLE_LEN], row: usize) {
                let ($($name,)+) = self;
                let mut i = 0;
                $(
                    // SAFETY: `bases[i]` advanced by `row` items of the `i`-th component's
                    // type, `$name`, is valid for a write of one and aligned for it (caller).
                    // `i < MAX_BUNDLE_LEN`: tuples have at most that many components.
                    unsafe { bases[i].cast::<$name>().add(row).write($name) };
                    i += 1;
                )+
            }

            #[inline(always)]
            unsafe fn from_components(f: &mut impl FnMut() -> *mut u8) -> Self {
                // SAFETY:
                // - by the caller, each pointer is a valid `$name` whose ownership passes to us;
                //   the tuple's fields are evaluated left to right, in the visiting order.
                unsafe { ($(f().cast::<$name>().read(),)+) }
            }
        }
    };
}

macro_rules! all_tuples {
    ($first:ident $(, $rest:ident)*) => {
        tuple_bundle!($first $(, $rest)*);
        all_tuples!($($rest),*);
    };
    () => {};
}

all_tuples!(C0, C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13, C14, C15);

// SAFETY: the empty bundle visits no component in every method, and hands `f` no pointer.
unsafe impl Bundle for () {
    fn component_ids(_: &mut Components, _: &mut impl FnMut(ComponentId)) {}

    fn type_ids(_: &mut impl FnMut(TypeId)) {}

    #[inline(always)]
    fn get_components<R>(self, f: impl FnOnce(&[*mut u8]) -> R) -> R {
        f(&[])
    }

    #[inline(always)]
    unsafe fn write_components(self, _: &mut impl FnMut(usize) -> *mut u8) {}

    #[inline(always)]
    unsafe fn write_row(self, _: &[*mut u8; MAX_BUNDLE_LEN], _: usize) {}

    #[inline(always)]
    unsafe fn from_components(_: &mut impl FnMut() -> *mut u8) -> Self {}
}

#[cfg(test)]
mod tests {
    use super::*;

    struct A(u32);
    struct B(String);
    struct C;

    #[test]
    fn ids_in_order_and_sorted() {
        let mut components = Components::new();
        components.register::<C>();
        let info = BundleInfo::new::<(B, A, C)>(&mut components).unwrap();
        let (a, b, c) = (
            components.id::<A>().unwrap(),
            components.id::<B>().unwrap(),
            components.id::<C>().unwrap(),
        );
        assert_eq!(info.ids(), &[b, a, c]);
        assert_eq!(info.sorted_ids(), &[c, b, a]);
    }

    #[test]
    fn a_repeated_component_is_rejected() {
        let mut components = Components::new();
        let err = BundleInfo::new::<(A, B, A)>(&mut components).unwrap_err();
        assert!(matches!(err, ComponentError::DuplicateComponent { .. }));
        assert!(err.to_string().contains("A"), "{err}");
    }

    #[test]
    fn components_move_out_and_back_once() {
        let bundle = (A(7), B("seven".to_owned()), C);
        let sizes = [size_of::<A>(), size_of::<B>(), size_of::<C>()];
        // 8-aligned buffers: every component here has an alignment of at most 8.
        let mut moved: Vec<Vec<u64>> = bundle.get_components(|ptrs| {
            assert_eq!(ptrs.len(), 3);
            let copy = |i: usize| {
                let mut buf = vec![0u64; sizes[i].div_ceil(8).max(1)];
                // SAFETY: `ptrs[i]` is readable for `sizes[i]` bytes; `buf` is large enough.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptrs[i], buf.as_mut_ptr().cast(), sizes[i])
                };
                buf
            };
            (0..3).map(copy).collect()
        });
        let mut j = 0;
        // SAFETY: each pointer is an aligned byte copy of the value moved out above, in order,
        // read once (the String's ownership returns to the rebuilt bundle).
        let (a, b, _c) = unsafe {
            <(A, B, C)>::from_components(&mut || {
                j += 1;
                moved[j - 1].as_mut_ptr().cast()
            })
        };
        assert_eq!(a.0, 7);
        assert_eq!(b.0, "seven");
    }

    #[test]
    fn sixteen_components() {
        let mut components = Components::new();
        let info = BundleInfo::new::<(
            u8,
            u16,
            u32,
            u64,
            u128,
            i8,
            i16,
            i32,
            i64,
            i128,
            f32,
            f64,
            bool,
            char,
            [u8; 0],
            String,
        )>(&mut components)
        .unwrap();
        assert_eq!(info.ids().len(), 16);
    }
}
