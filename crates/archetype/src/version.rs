//! [`Version`]: the counter tables and archetypes keep so that a snapshot can tell whether
//! their rows are as it copied them.

/// Names a container's layout as it is: a fresh value at every change of it, and the value a
/// snapshot recorded when one is restored. Fresh values never repeat, so two equal versions
/// mean the same layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Version {
    current: u64,
    /// The next fresh value; never goes back.
    next: u64,
}

impl Version {
    pub(crate) const fn new() -> Self {
        Self { current: 0, next: 1 }
    }

    /// Marks a change: a fresh value.
    #[inline]
    pub(crate) fn touch(&mut self) {
        self.current = self.next;
        self.next += 1;
    }

    #[inline]
    pub(crate) fn get(self) -> u64 {
        self.current
    }

    /// Puts back a value a snapshot recorded; `None`: a fresh one.
    pub(crate) fn set(&mut self, recorded: Option<u64>) {
        match recorded {
            Some(v) => self.current = v,
            None => self.touch(),
        }
    }
}
