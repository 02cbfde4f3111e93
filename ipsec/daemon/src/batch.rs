//! Batches: the gateway's loops read many packets with one system call and send what the
//! core made of them with one more.
//!
//! A loop opens a [`Stash`] on its thread. While it hands a batch to the core, the sink does
//! not send each packet at once but stashes it here; at the end of the batch the loop takes
//! the stash and sends it together (sendmmsg to the network, one coalescing write per TCP
//! flow to the TUN). The core calls the sink from whatever thread finishes a packet: with
//! ocf's synchronous `soft` driver that is the loop itself; an asynchronous driver's
//! completion thread has no stash, and the sink sends its packets one by one.
//!
//! Packets leave in the order the core finished them, so a flow's order through one loop
//! is kept.

use std::cell::RefCell;

use ipsec_core::Packet;

/// The most packets one read hands to the core. A GSO super-packet from the TUN (up to 64
/// KiB) splits into this many segments at most (wireguard-go and tun-rs use the same).
pub const BATCH: usize = tun_rs::IDEAL_BATCH_SIZE;

/// What the core produced during the current batch, by direction.
#[derive(Default)]
pub struct Stash {
    pub transmit: Vec<Packet>,
    pub deliver: Vec<Packet>,
}

thread_local! {
    static STASH: RefCell<Option<Stash>> = const { RefCell::new(None) };
}

/// Makes the sink stash this thread's packets until [`take`].
pub fn open() {
    STASH.with(|s| {
        *s.borrow_mut() =
            Some(Stash { transmit: Vec::with_capacity(BATCH), deliver: Vec::with_capacity(BATCH) })
    });
}

/// Stashes a packet for the network, or gives it back if this thread has no stash.
pub fn transmit(p: Packet) -> Option<Packet> {
    STASH.with(|s| match &mut *s.borrow_mut() {
        Some(st) => {
            st.transmit.push(p);
            None
        }
        None => Some(p),
    })
}

/// Stashes a packet for the TUN, or gives it back if this thread has no stash.
pub fn deliver(p: Packet) -> Option<Packet> {
    STASH.with(|s| match &mut *s.borrow_mut() {
        Some(st) => {
            st.deliver.push(p);
            None
        }
        None => Some(p),
    })
}

/// Swaps this thread's stash with `into` (which should be empty, with capacity: the
/// vectors go back and forth, so a batch allocates nothing).
pub fn take(into: &mut Stash) {
    STASH.with(|s| {
        if let Some(st) = &mut *s.borrow_mut() {
            std::mem::swap(&mut st.transmit, &mut into.transmit);
            std::mem::swap(&mut st.deliver, &mut into.deliver);
        }
    });
}

/// A loop's spare packet buffers, all `size` bytes long, so that reading a packet neither
/// allocates nor zeroes a new one.
pub struct Pool {
    size: usize,
    spare: Vec<Vec<u8>>,
}

impl Pool {
    pub fn new(size: usize) -> Pool {
        Pool { size, spare: Vec::with_capacity(2 * BATCH) }
    }

    /// A buffer of `size` bytes (its contents are whatever the last packet left).
    pub fn get(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_else(|| vec![0u8; self.size])
    }

    /// Takes a buffer back (a packet sent or dropped). At most two batches are kept, and
    /// only buffers of about the pool's size: one grown for a rare large packet (up to
    /// 64 KiB) is freed rather than held.
    pub fn put(&mut self, mut v: Vec<u8>) {
        if self.spare.len() < 2 * BATCH && (self.size..2 * self.size).contains(&v.capacity()) {
            v.resize(self.size, 0);
            self.spare.push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_without_a_stash_gets_its_packets_back() {
        std::thread::spawn(|| {
            let p = Packet::new(vec![1, 2, 3]);
            assert_eq!(transmit(p.clone()), Some(p.clone()));
            assert_eq!(deliver(p.clone()), Some(p));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_stash_keeps_packets_in_order_until_taken() {
        std::thread::spawn(|| {
            open();
            for i in 0..5u8 {
                assert_eq!(transmit(Packet::new(vec![i])), None);
                assert_eq!(deliver(Packet::new(vec![10 + i])), None);
            }
            let mut got = Stash::default();
            take(&mut got);
            let t: Vec<u8> = got.transmit.iter().map(|p| p.data[0]).collect();
            let d: Vec<u8> = got.deliver.iter().map(|p| p.data[0]).collect();
            assert_eq!(t, [0, 1, 2, 3, 4]);
            assert_eq!(d, [10, 11, 12, 13, 14]);
            // The stash now holds the (empty) vectors given in; the next batch starts empty.
            let mut again = Stash::default();
            take(&mut again);
            assert!(again.transmit.is_empty() && again.deliver.is_empty());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pool_buffers_come_back_full_size() {
        let mut pool = Pool::new(100);
        let mut b = pool.get();
        assert_eq!(b.len(), 100);
        b.truncate(10);
        pool.put(b);
        assert_eq!(pool.get().len(), 100);
        // A buffer smaller than the pool's size is not kept, nor one grown for a large
        // packet.
        pool.put(vec![0u8; 50]);
        pool.put(vec![0u8; 1000]);
        assert_eq!(pool.get().capacity(), 100);
        assert_eq!(pool.get().len(), 100);
    }
}
