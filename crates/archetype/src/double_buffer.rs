//! [`DoubleBuffer`]: an append-only log kept in two halves and aged a half at a time, read
//! through [`BufferCursor`]s that each see every entry once. Events and removal logs are made
//! of it.

/// Entries in the order they were pushed, each with an id (its position in the buffer's whole
/// history). [`DoubleBuffer::update`] ages the buffer: the entries pushed before the previous
/// update are dropped, so an entry lives from its push until the end of the update period after
/// its own.
#[derive(Debug)]
pub struct DoubleBuffer<T> {
    /// Pushed in the previous update period; ids `older_start..newer_start`.
    older: Vec<T>,
    /// Pushed in this one; ids `newer_start..`.
    newer: Vec<T>,
    older_start: u64,
    newer_start: u64,
}

impl<T> Default for DoubleBuffer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> DoubleBuffer<T> {
    /// An empty buffer.
    pub const fn new() -> Self {
        Self { older: Vec::new(), newer: Vec::new(), older_start: 0, newer_start: 0 }
    }

    /// Appends `entry`.
    #[inline]
    pub fn push(&mut self, entry: T) {
        self.newer.push(entry);
    }

    /// Makes room for `additional` more entries, so that as many [`Self::push`]es cannot
    /// allocate; on error nothing changes.
    pub fn try_reserve(
        &mut self,
        additional: usize,
    ) -> Result<(), std::collections::TryReserveError> {
        self.newer.try_reserve(additional)
    }

    /// Appends every entry of `entries`; returns how many there were.
    pub fn extend(&mut self, entries: impl IntoIterator<Item = T>) -> usize {
        let before = self.newer.len();
        self.newer.extend(entries);
        self.newer.len() - before
    }

    /// The id the next entry will get: a cursor there reads only what comes after now.
    pub fn next_id(&self) -> u64 {
        self.newer_start + self.newer.len() as u64
    }

    /// How many entries are still readable.
    pub fn len(&self) -> usize {
        self.older.len() + self.newer.len()
    }

    /// Whether no entry is readable.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cursor a reader at `cursor` effectively has: one past the end belongs to a buffer
    /// this one replaced (a resource taken out and put back new), so it reads all of this one.
    fn effective(&self, cursor: u64) -> u64 {
        if cursor > self.next_id() { self.older_start } else { cursor }
    }

    /// The entries with ids from `cursor` on, oldest first, and how many a reader at `cursor`
    /// missed (dropped by updates before it read them).
    pub fn read_from(&self, cursor: u64) -> (impl Iterator<Item = &T>, u64) {
        let cursor = self.effective(cursor);
        let missed = self.older_start.saturating_sub(cursor);
        let from = cursor.max(self.older_start);
        let skip_older = (from - self.older_start).min(self.older.len() as u64) as usize;
        let skip_newer = from.saturating_sub(self.newer_start).min(self.newer.len() as u64);
        (self.older[skip_older..].iter().chain(&self.newer[skip_newer as usize..]), missed)
    }

    /// How many entries a reader at `cursor` has not read.
    pub fn unread_from(&self, cursor: u64) -> usize {
        (self.next_id() - self.effective(cursor).max(self.older_start)) as usize
    }

    /// Takes every readable entry out, oldest first. Ids go on from where they were, so a
    /// reader that had not read the drained entries counts them as missed.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + use<T> {
        let next = self.next_id();
        let older = std::mem::take(&mut self.older);
        let newer = std::mem::take(&mut self.newer);
        self.older_start = next;
        self.newer_start = next;
        older.into_iter().chain(newer)
    }

    /// Drops every readable entry, as [`DoubleBuffer::drain`] without taking them.
    pub fn clear(&mut self) {
        self.drain().for_each(drop);
    }

    /// Ages the buffer: the previous period's entries are dropped, this period's become the
    /// previous one's.
    pub fn update(&mut self) {
        self.older = std::mem::take(&mut self.newer);
        self.older_start = self.newer_start;
        self.newer_start = self.older_start + self.older.len() as u64;
    }
}

/// A reader's position in a [`DoubleBuffer`]: the id it reads next, and how many entries aged
/// out before it read them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferCursor {
    next: u64,
    missed: u64,
}

impl BufferCursor {
    /// A cursor that reads from id `next` on ([`DoubleBuffer::next_id`]: only what comes
    /// after now).
    pub const fn at(next: u64) -> Self {
        Self { next, missed: 0 }
    }

    /// The entries of `buffer` not read yet by this cursor, oldest first; they count as read.
    pub fn read<'b, T>(
        &mut self,
        buffer: &'b DoubleBuffer<T>,
    ) -> impl Iterator<Item = &'b T> + use<'b, T> {
        let (entries, missed) = buffer.read_from(self.next);
        self.missed += missed;
        self.next = buffer.next_id();
        entries
    }

    /// How many entries of `buffer` this cursor has not read.
    pub fn unread<T>(&self, buffer: &DoubleBuffer<T>) -> usize {
        buffer.unread_from(self.next)
    }

    /// Marks every entry of `buffer` read.
    pub fn clear<T>(&mut self, buffer: &DoubleBuffer<T>) {
        self.next = buffer.next_id();
    }

    /// How many entries aged out before this cursor read them.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(cursor: &mut BufferCursor, buffer: &DoubleBuffer<u32>) -> Vec<u32> {
        cursor.read(buffer).copied().collect()
    }

    #[test]
    fn an_entry_lives_until_the_end_of_the_period_after_its_own() {
        let mut buffer = DoubleBuffer::new();
        let (mut early, mut late) = (BufferCursor::default(), BufferCursor::default());
        buffer.push(1);
        assert_eq!(buffer.extend([2, 3]), 2);
        assert_eq!(early.unread(&buffer), 3);
        assert_eq!(read_all(&mut early, &buffer), [1, 2, 3]);
        assert_eq!(early.unread(&buffer), 0);
        buffer.update();
        buffer.push(4);
        // Read once each, also across an update.
        assert_eq!(read_all(&mut early, &buffer), [4]);
        assert_eq!((buffer.len(), buffer.next_id()), (4, 4));
        buffer.update();
        // 1..=3 aged out unread by `late`.
        assert_eq!(late.unread(&buffer), 1);
        assert_eq!(read_all(&mut late, &buffer), [4]);
        assert_eq!((late.missed(), early.missed()), (3, 0));
        buffer.update();
        assert!(buffer.is_empty());
        assert_eq!(buffer.next_id(), 4);
    }

    #[test]
    fn drain_and_clear_empty_the_buffer_and_readers_miss_what_they_had_not_read() {
        let mut buffer = DoubleBuffer::new();
        let (mut reader, mut idle) = (BufferCursor::default(), BufferCursor::default());
        buffer.extend([1, 2]);
        assert_eq!(read_all(&mut reader, &buffer), [1, 2]);
        buffer.update();
        buffer.push(3);
        assert_eq!(buffer.drain().collect::<Vec<_>>(), [1, 2, 3]);
        assert!(buffer.is_empty());
        assert_eq!(buffer.next_id(), 3, "ids go on");
        assert_eq!(read_all(&mut reader, &buffer), Vec::<u32>::new());
        assert_eq!(reader.missed(), 1, "3 was drained before it was read");
        buffer.push(4);
        assert_eq!(read_all(&mut idle, &buffer), [4]);
        assert_eq!(idle.missed(), 3);
        buffer.push(5);
        buffer.clear();
        assert!(buffer.is_empty());
        buffer.push(6);
        assert_eq!(read_all(&mut reader, &buffer), [6]);
        assert_eq!(reader.missed(), 3, "4 and 5 too");
    }

    #[test]
    fn a_cursor_past_the_end_reads_a_replacing_buffer_whole() {
        let mut old = DoubleBuffer::new();
        old.extend([1, 2, 3]);
        let mut cursor = BufferCursor::default();
        read_all(&mut cursor, &old);
        let mut new = DoubleBuffer::new();
        new.push(9);
        assert_eq!(cursor.unread(&new), 1);
        assert_eq!(read_all(&mut cursor, &new), [9]);
        assert_eq!(cursor.missed(), 0);
    }

    #[test]
    fn clear_and_at_skip_what_is_there() {
        let mut buffer = DoubleBuffer::new();
        buffer.extend([1, 2]);
        let mut cursor = BufferCursor::at(buffer.next_id());
        assert_eq!(cursor.unread(&buffer), 0);
        buffer.push(3);
        let mut other = BufferCursor::default();
        other.clear(&buffer);
        assert_eq!(read_all(&mut cursor, &buffer), [3]);
        assert_eq!(read_all(&mut other, &buffer), Vec::<u32>::new());
    }
}
