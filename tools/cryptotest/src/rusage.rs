//! CPU time and context switches of the whole process (every thread: the benchmark's, the
//! framework's workers, a simulated device's), from getrusage(2). "Криптоакселерация" (a FreeBSD user's
//! glxsb measurements, 2013) found why an
//! accelerator was slow by counting voluntary context switches: each is a thread that went
//! to sleep waiting for something.

use nix::sys::resource::{getrusage, UsageWho};

/// A reading of the process's resource usage.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub user_s: f64,
    pub sys_s: f64,
    /// Voluntary context switches (the thread blocked).
    pub vcsw: i64,
    /// Involuntary context switches (the thread was preempted).
    pub ivcsw: i64,
}

impl Usage {
    /// Now. If getrusage fails (it cannot for RUSAGE_SELF), zeros.
    pub fn now() -> Usage {
        let Ok(u) = getrusage(UsageWho::RUSAGE_SELF) else { return Usage::default() };
        let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        Usage {
            user_s: secs(u.user_time()),
            sys_s: secs(u.system_time()),
            vcsw: u.voluntary_context_switches(),
            ivcsw: u.involuntary_context_switches(),
        }
    }

    /// What was used between `earlier` and `self`.
    pub fn since(self, earlier: Usage) -> Usage {
        Usage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            vcsw: self.vcsw - earlier.vcsw,
            ivcsw: self.ivcsw - earlier.ivcsw,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_as_user_time_and_sleeping_as_a_voluntary_switch() {
        let before = Usage::now();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 50 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        let used = Usage::now().since(before);
        assert!(used.user_s + used.sys_s >= 0.02, "{used:?}");
        assert!(used.vcsw >= 1, "{used:?}");
    }
}
