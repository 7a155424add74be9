//! The tests of the page sources and of [`Reservation`]: commits, decommits, huge pages and
//! prefaulting, checked against the kernel's view in `/proc/self/smaps`.

use super::*;
use crate::error::StorageError;

fn sources() -> Vec<Arc<dyn PageSource>> {
    #[cfg(all(unix, not(target_family = "wasm")))]
    if !cfg!(miri) {
        return vec![Arc::new(OsPages), Arc::new(HeapPages::new())];
    }
    vec![Arc::new(HeapPages::new())]
}

#[test]
fn commit_write_decommit_reads_zero() {
    for source in sources() {
        let page = source.page_size();
        let mut r = Reservation::new(source, 8 * page).unwrap();
        assert_eq!(r.reserved_bytes(), 8 * page);
        assert_eq!(r.committed_bytes(), 0);
        r.commit_to(page + 1).unwrap();
        assert_eq!(r.committed_bytes(), 2 * page);
        // SAFETY: two pages are committed.
        unsafe { r.as_ptr().as_ptr().write_bytes(0xAB, 2 * page) };
        r.decommit_to(1).unwrap();
        assert_eq!(r.committed_bytes(), page);
        r.commit_to(2 * page).unwrap();
        // SAFETY: two pages are committed; the second was decommitted and reads as zero.
        let second = unsafe { *r.as_ptr().as_ptr().add(page + 7) };
        assert_eq!(second, 0);
        // SAFETY: as above, the first page kept its contents.
        let first = unsafe { *r.as_ptr().as_ptr().add(7) };
        assert_eq!(first, 0xAB);
    }
}

#[test]
fn commit_past_reservation_is_an_error() {
    for source in sources() {
        let page = source.page_size();
        let mut r = Reservation::new(source, page).unwrap();
        let err = r.commit_to(page + 1).unwrap_err();
        assert!(matches!(err, StorageError::CapacityExceeded { .. }), "{err}");
        assert_eq!(r.committed_bytes(), 0);
    }
}

#[test]
fn injected_commit_failure_changes_nothing() {
    let source = FaultyPages::failing_commit(2);
    let page = source.page_size();
    let mut r = Reservation::new(source.clone(), 4 * page).unwrap();
    r.commit_to(page).unwrap();
    let err = r.commit_to(2 * page).unwrap_err();
    assert!(matches!(err, StorageError::Commit { .. }), "{err}");
    assert_eq!(r.committed_bytes(), page);
    r.commit_to(2 * page).unwrap();
    assert_eq!(r.committed_bytes(), 2 * page);
    assert_eq!(source.commits(), 3);
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap")]
fn os_refuses_an_impossible_reservation() {
    let err = Reservation::new(Arc::new(OsPages), usize::MAX / 2).unwrap_err();
    assert!(matches!(err, StorageError::Reserve { .. }), "{err}");
    assert!(err.to_string().contains("reserve"));
}

#[cfg(all(unix, not(target_family = "wasm")))]
/// The kernel's view of the mappings that overlap `[start, end)`, from `/proc/self/smaps`.
#[derive(Debug)]
struct Mapping {
    rss_kib: usize,
    anon_huge_kib: usize,
    flags: String,
}

#[cfg(all(unix, not(target_family = "wasm")))]
fn mappings_in(start: usize, end: usize) -> Vec<Mapping> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut found = Vec::new();
    let mut current: Option<Mapping> = None;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            found.extend(current.take());
            if lo < end && hi > start {
                current = Some(Mapping { rss_kib: 0, anon_huge_kib: 0, flags: String::new() });
            }
            continue;
        }
        let Some(m) = current.as_mut() else { continue };
        let number = || words.clone().next().and_then(|w| w.parse().ok()).unwrap_or(0);
        match first {
            "Rss:" => m.rss_kib = number(),
            "AnonHugePages:" => m.anon_huge_kib = number(),
            "VmFlags:" => m.flags = words.collect::<Vec<_>>().join(" "),
            _ => {}
        }
    }
    found.extend(current);
    found
}

#[cfg(all(unix, not(target_family = "wasm")))]
fn range_of(r: &Reservation) -> (usize, usize) {
    let start = r.as_ptr().as_ptr().addr();
    (start, start + r.reserved_bytes())
}

#[cfg(all(unix, not(target_family = "wasm")))]
/// Writes `byte` over `[from, to)` of `r`, which must be committed.
fn fill(r: &mut Reservation, from: usize, to: usize, byte: u8) {
    assert!(to <= r.committed_bytes());
    // SAFETY: `[from, to)` is committed.
    unsafe { r.as_ptr().as_ptr().add(from).write_bytes(byte, to - from) };
}

#[cfg(all(unix, not(target_family = "wasm")))]
/// The byte at `at`, which must be committed.
fn byte_at(r: &Reservation, at: usize) -> u8 {
    assert!(at < r.committed_bytes());
    // SAFETY: `at` is committed.
    unsafe { *r.as_ptr().as_ptr().add(at) }
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap")]
fn large_os_reservations_start_on_a_huge_page() {
    let Some(huge) = OsPagesWith::HUGE.huge_page_size() else {
        eprintln!("no transparent huge pages here: nothing to check");
        return;
    };
    assert!(huge.is_power_of_two() && huge > OsPagesWith::HUGE.page_size());
    for _ in 0..8 {
        let r = Reservation::new(Arc::new(OsPagesWith::HUGE), 64 << 20).unwrap();
        assert!(r.as_ptr().as_ptr().addr().is_multiple_of(huge), "{r:?}");
        assert_eq!(r.huge_page_size(), Some(huge));
        assert!(!r.uses_huge_pages());
    }
    // Small reservations are not aligned on purpose and never use huge pages.
    let small = Reservation::new(Arc::new(OsPagesWith::HUGE), HUGE_PAGES_FROM).unwrap();
    assert_eq!(small.huge_page_size(), None);
    // Nor do reservations from a source without huge pages, `OsPages` included.
    assert_eq!(OsPages.huge_page_size(), None);
    assert_eq!(Reservation::new(Arc::new(OsPages), 64 << 20).unwrap().huge_page_size(), None);
    let none = Reservation::new(Arc::new(OsPagesWith::DEFAULT), 64 << 20).unwrap();
    assert_eq!(none.huge_page_size(), None);
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap")]
fn huge_commits_round_up_past_the_threshold_and_read_back() {
    let Some(huge) = OsPagesWith::HUGE.huge_page_size() else { return };
    let page = OsPagesWith::HUGE.page_size();
    let mut r = Reservation::new(Arc::new(OsPagesWith::HUGE), 64 << 20).unwrap();
    let (start, end) = range_of(&r);
    // Below the threshold: whole small pages, no advice.
    r.commit_to(1).unwrap();
    assert_eq!(r.committed_bytes(), page);
    r.commit_to(HUGE_PAGES_FROM).unwrap();
    assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM);
    assert!(!r.uses_huge_pages());
    assert!(mappings_in(start, end).iter().all(|m| !m.flags.contains("hg")));
    fill(&mut r, 0, HUGE_PAGES_FROM, 0x11);
    // Past it: whole huge pages, and the range is advised.
    r.commit_to(HUGE_PAGES_FROM + 1).unwrap();
    assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + huge);
    assert!(r.uses_huge_pages());
    r.commit_to(HUGE_PAGES_FROM + 3 * huge - page).unwrap();
    assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + 3 * huge);
    let top = r.committed_bytes();
    assert_eq!(byte_at(&r, top - 1), 0, "fresh huge pages read as zero");
    fill(&mut r, HUGE_PAGES_FROM, top, 0x22);
    // Still two mappings (read-write prefix, reserved rest), both advised. (Fewer if the
    // kernel merged the rest with an identical neighbour.)
    let maps = mappings_in(start, end);
    assert!(maps.len() <= 2, "{maps:?}");
    assert!(maps.iter().all(|m| m.flags.contains("hg")), "{maps:?}");
    // The kernel may fall back to small pages (no free huge page), so this is reported, not
    // asserted; the benchmarks count the faults.
    eprintln!("AnonHugePages in the range: {} KiB", maps[0].anon_huge_kib);
    assert_eq!(byte_at(&r, 0), 0x11);
    assert_eq!(byte_at(&r, HUGE_PAGES_FROM - 1), 0x11);
    assert_eq!(byte_at(&r, HUGE_PAGES_FROM), 0x22);
    assert_eq!(byte_at(&r, top - 1), 0x22);
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap")]
fn huge_decommit_releases_memory_and_recommits_zeroed() {
    let Some(huge) = OsPagesWith::HUGE.huge_page_size() else { return };
    let page = OsPagesWith::HUGE.page_size();
    let mut r = Reservation::new(Arc::new(OsPagesWith::HUGE), 64 << 20).unwrap();
    let (start, end) = range_of(&r);
    let top = HUGE_PAGES_FROM + 4 * huge;
    r.commit_to(top).unwrap();
    fill(&mut r, 0, top, 0x33);
    let rss = |maps: &[Mapping]| maps.iter().map(|m| m.rss_kib).sum::<usize>();
    assert!(rss(&mappings_in(start, end)) >= top >> 10);

    // Past the threshold a decommit keeps whole huge pages: the one holding the last byte.
    r.decommit_to(HUGE_PAGES_FROM + huge + 1).unwrap();
    assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + 2 * huge);
    let maps = mappings_in(start, end);
    assert!(maps.len() <= 2, "the decommitted range merges back: {maps:?}");
    assert!(maps.iter().all(|m| m.flags.contains("hg")), "{maps:?}");
    assert!(rss(&maps) <= (HUGE_PAGES_FROM + 2 * huge) >> 10, "{maps:?}");

    // Below it, small pages again: `shrink_to_fit` of a nearly empty array frees nearly all.
    r.decommit_to(100).unwrap();
    assert_eq!(r.committed_bytes(), page);
    let maps = mappings_in(start, end);
    assert!(maps.len() <= 2, "{maps:?}");
    assert!(rss(&maps) <= (2 * huge) >> 10, "{maps:?}");
    assert_eq!(byte_at(&r, page - 1), 0x33, "kept bytes keep their contents");

    // Recommitted memory reads as zero, huge pages included, and takes writes.
    r.commit_to(top).unwrap();
    assert_eq!(r.committed_bytes(), top);
    for at in [page, HUGE_PAGES_FROM - 1, HUGE_PAGES_FROM, top - 1] {
        assert_eq!(byte_at(&r, at), 0, "at {at}");
    }
    assert_eq!(byte_at(&r, 0), 0x33);
    fill(&mut r, page, top, 0x44);
    assert_eq!(byte_at(&r, top - 1), 0x44);
    assert!(mappings_in(start, end).len() <= 2);
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap")]
fn refused_huge_page_advice_falls_back_to_small_pages() {
    let source = Arc::new(FaultyPages::new(Arc::new(OsPagesWith::HUGE), 0));
    if source.huge_page_size().is_none() {
        return;
    }
    source.refuse_huge_pages(true);
    let page = source.page_size();
    let mut r = Reservation::new(source.clone(), 64 << 20).unwrap();
    assert!(r.huge_page_size().is_some());
    r.commit_to(HUGE_PAGES_FROM + 1).unwrap();
    assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + page, "small pages, page granular");
    assert!(!r.uses_huge_pages());
    assert_eq!(r.huge_page_size(), None);
    assert_eq!(source.huge_page_advice(), 1);
    // It is not asked again, and the memory works as before.
    r.commit_to(HUGE_PAGES_FROM + 3 * page).unwrap();
    assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + 3 * page);
    assert_eq!(source.huge_page_advice(), 1);
    fill(&mut r, 0, HUGE_PAGES_FROM + 3 * page, 0x55);
    r.decommit_to(page).unwrap();
    r.commit_to(HUGE_PAGES_FROM + 3 * page).unwrap();
    assert_eq!(byte_at(&r, page), 0);
    assert_eq!(byte_at(&r, 0), 0x55);
    assert_eq!(source.huge_page_advice(), 1);
    let (start, end) = range_of(&r);
    assert!(mappings_in(start, end).iter().all(|m| !m.flags.contains("hg")));
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap")]
fn without_huge_pages_commits_stay_page_granular() {
    let source: Arc<dyn PageSource> = Arc::new(OsPagesWith::DEFAULT);
    let page = source.page_size();
    let mut r = Reservation::new(source, 64 << 20).unwrap();
    r.commit_to(HUGE_PAGES_FROM + 1).unwrap();
    assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + page);
    assert!(!r.uses_huge_pages());
}

#[test]
fn sources_without_huge_pages_refuse_the_advice() {
    let heap = HeapPages::new();
    assert_eq!(heap.huge_page_size(), None);
    let mut r = Reservation::new(Arc::new(heap), 4 * heap.page_size()).unwrap();
    r.commit_to(1).unwrap();
    // SAFETY: the range is the first page of a live reservation.
    let advice = unsafe { heap.advise_huge_pages(r.as_ptr(), heap.page_size()) };
    assert!(advice.is_err());
    #[cfg(all(unix, not(target_family = "wasm")))]
    assert_eq!(OsPagesWith::PLAIN.huge_page_size(), None);
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap")]
fn commits_past_a_mebibyte_are_resident_at_once_and_read_zero() {
    let resident_kib = |r: &Reservation| {
        let (start, end) = range_of(r);
        mappings_in(start, end).iter().map(|m| m.rss_kib).sum::<usize>()
    };
    let mut r = Reservation::new(Arc::new(OsPages), 64 << 20).unwrap();
    // Up to `PREFAULT_FROM`, committed pages cost nothing until they are touched.
    r.commit_to(PREFAULT_FROM).unwrap();
    assert_eq!(resident_kib(&r), 0);
    fill(&mut r, 0, 4096, 0x66);
    assert_eq!(resident_kib(&r), 4);
    // Past it, a commit is resident at once (up to `PREFAULT_MAX` of it) and reads as zero.
    r.commit_to(PREFAULT_FROM + PREFAULT_MAX + (1 << 20)).unwrap();
    let prefaulted = resident_kib(&r);
    assert!(prefaulted >= 4 + (PREFAULT_MAX >> 10), "prefaulted: {prefaulted} KiB");
    assert!(prefaulted < 4 + ((PREFAULT_MAX + (1 << 20)) >> 10), "at most PREFAULT_MAX");
    let top = r.committed_bytes();
    assert!((4096..top).step_by(4096).all(|at| byte_at(&r, at) == 0));
    fill(&mut r, 4096, top, 0x77);
    r.decommit_to(4096).unwrap();
    assert!(resident_kib(&r) <= 8, "decommitted: {} KiB", resident_kib(&r));
    r.commit_to(top).unwrap();
    assert_eq!(byte_at(&r, 4096), 0);
    assert_eq!(byte_at(&r, top - 1), 0);
    assert_eq!(byte_at(&r, 4095), 0x66);

    // Without prefaulting, only touched pages are resident.
    let mut plain = Reservation::new(Arc::new(OsPagesWith::PLAIN), 64 << 20).unwrap();
    plain.commit_to(PREFAULT_FROM).unwrap();
    plain.commit_to(PREFAULT_FROM + PREFAULT_MAX).unwrap();
    assert_eq!(resident_kib(&plain), 0);
    fill(&mut plain, PREFAULT_FROM, PREFAULT_FROM + 4096, 1);
    assert_eq!(resident_kib(&plain), 4);
}

#[test]
fn grow_to_moves_the_committed_bytes_and_the_new_rest_reads_zero() {
    // Far enough to leave the first reservation; less under miri, which reads every byte.
    let far = if cfg!(miri) { 40 } else { 600 };
    for source in sources() {
        let page = source.page_size();
        let mut r = Reservation::new(source, 8 * page).unwrap();
        r.commit_to(3 * page).unwrap();
        // SAFETY: three pages are committed.
        let bytes = unsafe { std::slice::from_raw_parts_mut(r.as_ptr().as_ptr(), 3 * page) };
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        r.grow_to(far * page + 1).unwrap();
        assert_eq!((r.reserved_bytes(), r.committed_bytes()), ((far + 1) * page, 3 * page));
        r.commit_to((far + 1) * page).unwrap();
        // SAFETY: the whole reservation is committed now.
        let bytes = unsafe { std::slice::from_raw_parts(r.as_ptr().as_ptr(), (far + 1) * page) };
        assert!(bytes[..3 * page].iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert!(bytes[3 * page..].iter().all(|&b| b == 0), "the new rest reads zero");
        // Growing to a size it already has changes nothing.
        let at = r.as_ptr();
        r.grow_to(page).unwrap();
        assert_eq!((r.as_ptr(), r.reserved_bytes()), (at, (far + 1) * page));
    }
}

#[test]
fn a_refused_grow_leaves_the_reservation_unchanged() {
    let source = FaultyPages::refusing_reserve_over(1 << 20);
    let page = source.page_size();
    let mut r = Reservation::new(source.clone(), 16 * page).unwrap();
    r.commit_to(2 * page).unwrap();
    // SAFETY: two pages are committed.
    unsafe { r.as_ptr().as_ptr().write_bytes(0x5A, 2 * page) };
    let at = r.as_ptr();
    let err = r.grow_to(2 << 20).unwrap_err();
    assert!(matches!(err, StorageError::Reserve { .. }), "{err}");
    assert_eq!((r.as_ptr(), r.reserved_bytes(), r.committed_bytes()), (at, 16 * page, 2 * page));
    // SAFETY: still two committed pages at the same place.
    let kept = unsafe { std::slice::from_raw_parts(r.as_ptr().as_ptr(), 2 * page) };
    assert!(kept.iter().all(|&b| b == 0x5A));
    assert_eq!(source.reserves(), 2);
}

/// The physical frame behind the page at `addr`, from `/proc/self/pagemap`; `None` when the
/// kernel hides frame numbers (an unprivileged process reads zeros) or the page is not present.
#[cfg(target_os = "linux")]
fn frame_of(addr: usize) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open("/proc/self/pagemap").ok()?;
    file.seek(SeekFrom::Start((addr / region::page::size() * 8) as u64)).ok()?;
    let mut entry = [0u8; 8];
    file.read_exact(&mut entry).ok()?;
    let entry = u64::from_le_bytes(entry);
    let present = entry >> 63 == 1;
    let frame = entry & ((1 << 55) - 1);
    (present && frame != 0).then_some(frame)
}

/// On Linux, growing an OS reservation moves its pages (`mremap`): the committed bytes keep
/// their physical frames, so nothing was copied, and reservations of 2 MiB and more start on a
/// 2 MiB boundary (whole page-table pages move).
#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "miri cannot mmap")]
fn os_pages_grow_by_moving_pages_not_copying_them() {
    let mut r = Reservation::new(Arc::new(OsPages), 4 << 20).unwrap();
    assert!(r.as_ptr().as_ptr().addr().is_multiple_of(2 << 20));
    r.commit_to(3 << 20).unwrap();
    let page = r.page_size();
    let pages: Vec<usize> = (0..(3 << 20) / page).step_by(97).collect();
    let mut frames = Vec::new();
    for &p in &pages {
        // SAFETY: page `p` is committed.
        unsafe { r.as_ptr().as_ptr().add(p * page).write(p as u8 | 1) };
        frames.push(frame_of(r.as_ptr().as_ptr().addr() + p * page));
    }
    let old = r.as_ptr();
    r.grow_to(64 << 20).unwrap();
    assert_ne!(r.as_ptr(), old);
    assert!(r.as_ptr().as_ptr().addr().is_multiple_of(2 << 20));
    for (&p, &frame) in pages.iter().zip(&frames) {
        // SAFETY: page `p` is committed (the committed prefix moved whole).
        assert_eq!(unsafe { r.as_ptr().as_ptr().add(p * page).read() }, p as u8 | 1);
        if frame.is_some() {
            let now = frame_of(r.as_ptr().as_ptr().addr() + p * page);
            assert_eq!(now, frame, "page {p} was copied to another frame");
        }
    }
    r.commit_to(64 << 20).unwrap();
    // SAFETY: the whole reservation is committed; the new rest reads zero.
    assert_eq!(unsafe { r.as_ptr().as_ptr().add((64 << 20) - 1).read() }, 0);
}
