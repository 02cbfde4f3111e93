//! Batches: the gateway's loops read many packets with one system call, hand them to the
//! core as one batch, and send the batch's results with one more (`net::loops`). The
//! buffers come from a per-loop [`Pool`] and go back to it once sent.

/// The most packets one read hands to the core. A GSO super-packet from the TUN (up to 64
/// KiB) splits into this many segments at most (wireguard-go and tun-rs use the same).
pub const BATCH: usize = tun_rs::IDEAL_BATCH_SIZE;

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
