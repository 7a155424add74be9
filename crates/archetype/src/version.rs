//! [`Version`]: the counter tables and archetypes keep so that a snapshot can tell whether
//! their rows are as it copied them.

/// Names a container's layout as it is: a fresh value at every change of it, and the value a
/// snapshot recorded when one is restored. Fresh values never repeat, so two equal versions
/// mean the same layout.
///
/// A change is on the structural paths (every spawn, despawn and row move touches a table and
/// an archetype), so [`Version::touch`] is two stores and no load of its own: the current
/// fresh value is derived (`fresh - 1`), and a restored one is kept aside until the next
/// change.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Version {
    /// One past the newest fresh value; never goes back.
    fresh: u64,
    /// The value a restore put back, or [`Version::NONE`] once the layout changed since.
    restored: u64,
}

impl Version {
    const NONE: u64 = u64::MAX;

    pub(crate) const fn new() -> Self {
        Self { fresh: 1, restored: Self::NONE }
    }

    /// Marks a change: a fresh value.
    #[inline]
    pub(crate) fn touch(&mut self) {
        self.fresh += 1;
        self.restored = Self::NONE;
    }

    #[inline]
    pub(crate) fn get(self) -> u64 {
        if self.restored != Self::NONE { self.restored } else { self.fresh - 1 }
    }

    /// Puts back a value a snapshot recorded; `None`: a fresh one.
    pub(crate) fn set(&mut self, recorded: Option<u64>) {
        match recorded {
            Some(v) => self.restored = v,
            None => self.touch(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Version;

    #[test]
    fn fresh_values_never_repeat_across_restores() {
        let mut v = Version::new();
        let mut seen = vec![v.get()];
        for _ in 0..3 {
            v.touch();
            seen.push(v.get());
        }
        // Back to the first value, then on: the values after it are new ones.
        v.set(Some(seen[0]));
        assert_eq!(v.get(), seen[0]);
        v.touch();
        assert!(!seen.contains(&v.get()), "{} was handed out before", v.get());
        let after = v.get();
        v.set(None);
        assert_ne!(v.get(), after);
    }
}
