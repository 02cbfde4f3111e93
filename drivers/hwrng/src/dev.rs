//! `/dev/hwrng`: the Linux kernel's hardware RNG character device (virtio-rng in a VM,
//! TPM, a SoC's TRNG), whichever `/sys/class/misc/hw_random/rng_current` names.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use ocf_health::{NoiseSource, SourceError};

/// The device's path.
pub const PATH: &str = "/dev/hwrng";

/// An open hardware RNG device.
pub struct DevHwrng {
    file: File,
}

impl DevHwrng {
    /// Opens the device at `path`, or says why not.
    pub fn open(path: &Path) -> Result<DevHwrng, String> {
        File::open(path).map(|file| DevHwrng { file }).map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl NoiseSource for DevHwrng {
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError> {
        // read_exact retries short reads and EINTR.
        self.file.read_exact(buf).map_err(|_| SourceError { why: "/dev/hwrng could not be read" })
    }
}
