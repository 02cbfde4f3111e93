//! A request whose buffers are segmented reaches its driver through temporaries
//! (`Request::with_views`, `Request::with_input_output`: the payload and AAD gathered, the
//! result scattered back). Those temporaries hold the message, plaintext included; they must
//! be wiped before the allocator gets them back.
//!
//! This test binary's allocator looks into every block freed on a watching thread, before
//! freeing it, for a marker the message carries: a block that still holds it is a copy of
//! the message left in freed memory. Each case also checks that the driver's views carried
//! the marker and that the segmented path did free temporaries of the message's size, so a
//! case cannot pass by not taking the path it tests.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ocf::{Aad, Buffer, Op, Request, TagPlace};

/// What the message carries, repeated: a block freed with this in it was not wiped.
const MARKER: &[u8; 16] = b"plaintext-MARKER";

struct Watching;

thread_local! {
    static WATCH: Cell<bool> = const { Cell::new(false) };
    /// Blocks of at least `MIN_WATCHED` bytes freed while watching.
    static FREED: Cell<usize> = const { Cell::new(0) };
    /// Of those, blocks that still held the marker.
    static UNWIPED: Cell<usize> = const { Cell::new(0) };
    static MIN_WATCHED: Cell<usize> = const { Cell::new(usize::MAX) };
}

// SAFETY: every call is forwarded to `System` unchanged; `dealloc` only reads the block it
// is handed (live, `layout.size()` bytes) before forwarding it, and touches thread-locals
// that are `const`-initialised `Cell`s (no allocation, no destructor).
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let watching = WATCH.try_with(Cell::get).unwrap_or(false);
        if watching && layout.size() >= MIN_WATCHED.with(Cell::get) {
            // SAFETY: the block is live until `System.dealloc` below.
            let block = unsafe { std::slice::from_raw_parts(ptr, layout.size()) };
            FREED.with(|c| c.set(c.get() + 1));
            if block.windows(MARKER.len()).any(|w| w == MARKER) {
                UNWIPED.with(|c| c.set(c.get() + 1));
            }
        }
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Watching = Watching;

/// `len` bytes of the marker, repeated.
fn message(len: usize) -> Vec<u8> {
    MARKER.iter().copied().cycle().take(len).collect()
}

/// `bytes` in segments of at most `seg` bytes.
fn segmented(bytes: &[u8], seg: usize) -> Buffer {
    Buffer::Segments(bytes.chunks(seg).map(<[u8]>::to_vec).collect())
}

/// Runs `f` watching frees of blocks of at least `min` bytes; returns (freed, unwiped).
fn watch(min: usize, f: impl FnOnce()) -> (usize, usize) {
    FREED.with(|c| c.set(0));
    UNWIPED.with(|c| c.set(0));
    MIN_WATCHED.with(|c| c.set(min));
    WATCH.with(|w| w.set(true));
    f();
    WATCH.with(|w| w.set(false));
    (FREED.with(Cell::get), UNWIPED.with(Cell::get))
}

#[test]
fn a_gathered_payload_is_wiped_in_place() {
    let msg = message(1000);
    let mut req = Request::new(Op::Encrypt, segmented(&msg, 300));
    let mut seen = false;
    let (freed, unwiped) = watch(msg.len(), || {
        req.with_views(|v| seen = *v.payload == msg[..]);
    });
    assert!(seen, "the driver saw the gathered payload");
    assert!(freed >= 1, "the segmented path freed a temporary of the payload's size");
    assert_eq!(unwiped, 0, "{unwiped} freed block(s) still held the message");
    assert_eq!(req.buf.to_vec(), msg, "scattered back unchanged");
}

#[test]
fn a_gathered_aad_region_and_payload_are_wiped() {
    // The AAD is a region of the segmented buffer (as ESP's header is): gathered too.
    let msg = message(1024);
    let mut req = Request::new(Op::Encrypt, segmented(&msg, 200)).with_payload(512..1024);
    req.aad = Aad::Region(0..512);
    let mut seen = false;
    let (freed, unwiped) = watch(512, || {
        req.with_views(|v| seen = *v.aad == msg[..512] && *v.payload == msg[512..]);
    });
    assert!(seen);
    assert!(freed >= 2, "both the AAD and the payload went through temporaries: {freed}");
    assert_eq!(unwiped, 0, "{unwiped} freed block(s) still held the message");
}

#[test]
fn out_of_place_copies_are_wiped() {
    // Segmented input, segmented output: the payload is copied between them through a
    // temporary, the AAD gathered, and the result worked on in a temporary of `out`.
    let msg = message(768);
    let mut req = Request::new(Op::Encrypt, segmented(&msg, 100))
        .with_payload(256..768)
        .with_output(segmented(&[0; 512], 100))
        .with_tag_place(TagPlace::Separate);
    req.aad = Aad::Region(0..256);
    let mut seen = false;
    let (freed, unwiped) = watch(256, || {
        req.with_views(|v| seen = *v.aad == msg[..256] && *v.payload == msg[256..]);
    });
    assert!(seen);
    assert!(freed >= 3, "copy, AAD and result temporaries: {freed}");
    assert_eq!(unwiped, 0, "{unwiped} freed block(s) still held the message");
    assert_eq!(req.out.as_ref().map(Buffer::to_vec), Some(msg[256..].to_vec()));
}

#[test]
fn compression_temporaries_are_wiped() {
    // `with_input_output`: a segmented input gathered, a segmented `out` worked on in a
    // temporary and scattered; the "result" written there is the message again.
    let msg = message(900);
    let mut req = Request::new(Op::Compress, segmented(&msg, 128)).with_output(segmented(&[0; 900], 128));
    let mut seen = false;
    let (freed, unwiped) = watch(msg.len(), || {
        let r = req.with_input_output(|input, out| {
            seen = *input == msg[..];
            out[..input.len()].copy_from_slice(input);
            Ok(input.len())
        });
        assert!(r.is_ok());
    });
    assert!(seen);
    assert!(freed >= 2, "the gathered input and the output's temporary: {freed}");
    assert_eq!(unwiped, 0, "{unwiped} freed block(s) still held the message");
    assert_eq!(req.out.as_ref().map(Buffer::to_vec), Some(msg));
}

#[test]
fn the_watch_sees_an_unwiped_block() {
    // The allocator's check itself: a plain vector holding the message, dropped while
    // watching, is seen; a wiped one is not.
    let (freed, unwiped) = watch(64, || drop(message(64)));
    assert_eq!((freed, unwiped), (1, 1));
    let (freed, unwiped) = watch(64, || drop(zeroize::Zeroizing::new(message(64))));
    assert_eq!((freed, unwiped), (1, 0));
}
